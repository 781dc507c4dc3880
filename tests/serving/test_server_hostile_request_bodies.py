"""The embedded server reading hostile request bodies: JSON that decodes to 30 times its size, bodies
framed two ways, warmup files of recorded requests, repeated fields. One test (or more) per numbered
hole of this audit (the holes fixed elsewhere name their tests):

1. a REST body within `max_request_bytes` that decodes to 30 times its size (`[],[],...`);
2. the window limit estimated at 4 bytes a piece, which commas beat 4 times
   (test_export_long_texts.py: `test_the_window_limit_counts_what_any_text_may_read`);
3. U+2028 / U+2029 read one way by the export and another by the tokenizer (both now split words
   there, as the original's `str.split()`: test_export_inputs.py);
4. a body framed by Transfer-Encoding read by its Content-Length (request smuggling);
5. more than 1,000 warmup records, which TF Serving refuses to load;
6. a SQuAD export that reads part of a context without saying so (test_export_signatures.py);
7. a full batch queue answered RESOURCE_EXHAUSTED where TF Serving answers UNAVAILABLE
   (test_engine_batching.py);
8. an unknown version label answered NOT_FOUND where TF Serving answers INVALID_ARGUMENT
   (test_grpc_rest.py, test_engine.py);
9. a repeated `output_filter` entry accepted;
10. `seq_length` 2, which reads no token of any text (tests/pipelines/test_packing.py).
"""

import json

import numpy as np
import pytest

pytest.importorskip("tensorflow_serving")


import engine_fixtures as ef  # noqa: E402
from engine_fixtures import ok_predict  # noqa: E402
from test_server_hostile_input import prediction  # noqa: E402,F401 - the fixture, on this module's server
from test_server_hostile_parsing import MB, PeakRss, grpc_code, raw_http, rest  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from serving.server import InferenceEngine, ModelSource
    from serving.server.server import EmbeddedServer

    base = tmp_path_factory.mktemp("request_bodies_models")
    ef.write_tiny_model(str(base / "tiny" / "1"), version=1)
    engine = InferenceEngine([ModelSource("tiny", str(base / "tiny"))], poll_interval_s=0)
    server = EmbeddedServer(engine, grpc_port=0, rest_port=0, rest_header_timeout_s=60.0,
                            max_request_bytes=8 * MB).start()
    yield server
    server.stop(grace_s=5)


# ------------------------------------------------------------------ 1. JSON that decodes to 30x its size


def test_1_a_body_of_empty_lists_is_refused_before_it_is_decoded(server, prediction):
    count = (8 * MB) // 3 - 100  # within max_request_bytes: 8 MiB of "[],"
    body = b'{"instances": [' + b"[]," * (count - 1) + b"[]]}"
    assert len(body) <= 8 * MB
    with PeakRss() as rss:
        status, _, answer = rest(server, "POST", "/v1/models/tiny:predict", body)
    print(f"\n8 MiB of empty lists: {status}, peak RSS growth {rss.growth / MB:.0f} MB")
    assert status == 429 and "JSON values" in answer["error"] and "MiB" in answer["error"], answer
    assert rss.growth < 60 * MB, rss.growth  # the body itself, never ~230 MB of Python lists
    ok_predict(prediction)
    status, _, answer = rest(server, "POST", "/v1/models/tiny:predict", {"instances": ["a, b, c"] * 500})
    assert status == 200 and len(answer["predictions"]) == 500


def test_1_commas_and_brackets_inside_a_text_are_characters_not_json_values(server):
    from serving.server.json_codec import DECODED_BYTES_PER_VALUE, decoded_json_bytes

    body = json.dumps({"instances": ["a,[{" * 500_000]}).encode()  # 2 MB: one string
    assert decoded_json_bytes(body) <= len(body) + 4 * DECODED_BYTES_PER_VALUE
    status, _, answer = rest(server, "POST", "/v1/models/tiny:predict", body)
    assert status == 200 and len(answer["predictions"]) == 1, answer
    escaped = b'{"instances": ["a\\",[b", "c"]}'  # an escaped quote does not end the string
    assert decoded_json_bytes(escaped) == len(escaped) + 4 * DECODED_BYTES_PER_VALUE  # {, [, one comma, + 1
    # An unterminated string runs to the end, in one pass: the scan restarted at every later quote,
    # each time to the end (quadratic: a 40 KB body held the server, gRPC included, for 5 s; 2 MB, hours)
    unterminated = b'{"instances": ["' + b'\\",' * 700_000  # 2.1 MB
    assert decoded_json_bytes(unterminated) == len(unterminated) + 3 * DECODED_BYTES_PER_VALUE  # {, [, + 1
    status, _, answer = rest(server, "POST", "/v1/models/tiny:predict", unterminated)
    assert status == 400 and "error" in answer, answer
    ok_predict_rest = rest(server, "POST", "/v1/models/tiny:predict", {"instances": ["a"]})
    assert ok_predict_rest[0] == 200


def test_1_the_decode_budget_bounds_requests_together():
    import threading

    from serving.server.errors import ServingError
    from serving.server.json_codec import DecodeBudget, decoded_json_bytes

    body = b'{"instances": [[1, 2], [3, 4]]}'
    need = decoded_json_bytes(body)
    assert need >= len(body) + 7 * 96  # ",", "[" and "{": at least every value
    budget = DecodeBudget(need, wait_s=0.2)
    with budget.hold(body):
        with pytest.raises(ServingError, match="UNAVAILABLE: the server is decoding too many"):
            with budget.hold(body):
                pass
    with budget.hold(body):  # given back
        pass
    with pytest.raises(ServingError, match="RESOURCE_EXHAUSTED: .*over the server's"):
        with budget.hold(body + b" " * 10):
            pass
    # a waiting request goes on as soon as the first is done
    budget = DecodeBudget(need, wait_s=300)  # returns once the budget is free: a slow thread still gets it
    entered = threading.Event()

    def second_request():
        with budget.hold(body):
            entered.set()

    with budget.hold(body):
        waiter = threading.Thread(target=second_request)
        waiter.start()
        assert not entered.wait(0.2)
    assert entered.wait(60)
    waiter.join()


# ------------------------------------------------------------------ 4. Transfer-Encoding beside Content-Length


@pytest.mark.parametrize("codings, status", [
    ([b"chunked"], 411),
    ([b"chunked", b"identity"], 400),  # two framings: a proxy may read either
    ([b"gzip"], 400),  # not chunked last: RFC 9112 6.3, the length is unknown
    ([b"identity"], 400),
    ([b"0"], 400),
    ([b"gzip, chunked"], 411),
])
def test_4_a_body_framed_by_transfer_encoding_is_never_read_by_its_content_length(server, codings, status):
    body = json.dumps({"instances": ["a"]}).encode()
    head = b"POST /v1/models/tiny:predict HTTP/1.1\r\nHost: x\r\n" + b"".join(
        b"Transfer-Encoding: " + coding + b"\r\n" for coding in codings)
    answer_status, answer = raw_http(server, head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
    assert answer_status == status, answer
    assert "Transfer-Encoding" in answer["error"] or "chunked" in answer["error"], answer
    status, _, _ = rest(server, "POST", "/v1/models/tiny:predict", {"instances": ["a"]})
    assert status == 200


# ------------------------------------------------------------------ 5. warmup files TF Serving refuses


def test_5_a_warmup_file_over_tf_servings_maximum_fails_the_load(tmp_path):
    from serving.server import InferenceEngine, ModelSource

    path = ef.write_tiny_model(str(tmp_path / "tiny" / "1"), version=1, warmup=None)
    ef.write_warmup(path, [["a"]] * 1001)
    # polling on: the load was retried 5 x 60 s, though the same file fails the same way
    engine = InferenceEngine([ModelSource("tiny", str(tmp_path / "tiny"))], poll_interval_s=30)
    engine.start()
    try:
        status = engine.model_status("tiny")[0]
        assert status["state"] == "END" and status["error_code"] == "INVALID_ARGUMENT", status
        assert "Number of warmup records exceeds the maximum (1000)" in status["error_message"]
    finally:
        engine.stop(drain_timeout_s=5)
    ef.write_warmup(path, [["a"]] * 1000)  # the maximum itself loads
    engine = InferenceEngine([ModelSource("tiny", str(tmp_path / "tiny"))], poll_interval_s=0)
    engine.start()
    try:
        assert engine.model_status("tiny")[0]["state"] == "AVAILABLE"
    finally:
        engine.stop(drain_timeout_s=5)


def test_5_export_refuses_more_warmup_requests_than_tf_serving_loads():
    from serving.exporter import check_export_options

    check_export_options(version=1, warmup_requests=1000)
    with pytest.raises(ValueError, match=r"--warmup-requests must be 0 to 1000 .*got 1001"):
        check_export_options(version=1, warmup_requests=1001, flag_prefix="--")


# ------------------------------------------------------------------ 9. a repeated output_filter entry


def test_9_a_repeated_output_filter_entry_is_invalid_argument(server, prediction):
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = "tiny"
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(np.array([b"a"], dtype=object)))
    outputs = list(ok_predict(prediction).outputs)
    request.output_filter.extend([outputs[0], outputs[0]])
    code, details = grpc_code(lambda: prediction.Predict(request, timeout=300))
    assert code == "INVALID_ARGUMENT" and details == f"duplicate output tensor alias: {outputs[0]}", details
    del request.output_filter[:]
    request.output_filter.append(outputs[0])
    assert list(prediction.Predict(request, timeout=300).outputs) == [outputs[0]]
