r"""Property-based fuzzing of the embedded server (issue 13): whatever a client sends, it gets a proper status.

Hypothesis generates PredictRequest / ClassificationRequest protos (any dtype, declared
shapes up to 2**40 elements, value counts that agree or not, odd names and versions), REST
bodies (arbitrary JSON, nested deep, huge and non-finite numbers; JSON text with any `\uXXXX`
escape, lone UTF-16 surrogates included, wherever a string goes) and URLs, raw HTTP request
heads, header values written with other scripts' digits ("²", "９", "٣"), Classify / Regress
requests with a shared context (up to the size limits, times up to the row limit), and
version directory names. Properties:

- gRPC answers OK or a client status, never INTERNAL / UNKNOWN / DATA_LOSS;
- REST answers a JSON `{"error": ...}` with a 4xx (or 200 / 503), never a 5xx for input, and
  never closes a connection without an answer;
- a lone surrogate anywhere in a REST body is a 400 that says so;
- the server's RSS (a process of its own) stays within 200 MB of where it started;
- only names of ASCII digits are version directories, and listing them never raises.

The default run tries a few dozen examples per property (seconds); `-m slow` runs thousands.
"""

import json
import os
import re
import socket
import subprocess
import sys

import numpy as np
import pytest

import grpc  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import engine_fixtures as ef  # noqa: E402

CLIENT_CODES = {"OK", "INVALID_ARGUMENT", "NOT_FOUND", "FAILED_PRECONDITION", "RESOURCE_EXHAUSTED",
                "UNAVAILABLE", "OUT_OF_RANGE", "UNIMPLEMENTED"}
FAST = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
LONG = settings(max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck))
RSS_BOUND = 200 << 20
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def rss_bytes(pid="self"):
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# The server runs in a process of its own, so that its RSS is the server's alone: Hypothesis
# keeps every example's choices in this process (a 3,000-example run of these strategies
# grows it by ~370 MB with no server at all), as do the other tests of a long pytest session.
_SERVE = """
import json, sys
sys.path.insert(0, sys.argv[2])
import engine_fixtures as ef
from serving.server import BatchingOptions, InferenceEngine, Limits, ModelSource
from serving.server.server import EmbeddedServer

ef.write_tiny_model(sys.argv[1] + "/tiny/1", version=1)
engine = InferenceEngine([ModelSource("tiny", sys.argv[1] + "/tiny", labels={"stable": 1})], poll_interval_s=0,
                         batching=BatchingOptions(max_batch_size=16, batch_timeout_micros=1000),
                         limits=Limits(max_batch_size_per_request=64, max_request_bytes=1 << 20))
server = EmbeddedServer(engine, grpc_port=0, rest_port=0, max_request_bytes=1 << 20).start()
print(json.dumps({"grpc_address": server.grpc_address, "rest_port": server.rest_port}), flush=True)
sys.stdin.read()  # until the test closes stdin
server.stop(grace_s=5)
"""


class ServerProcess:
    """The fuzzed server in a child process: its addresses, and its RSS at start."""

    def __init__(self, base):
        self.process = subprocess.Popen(
            [sys.executable, "-c", _SERVE, str(base), os.path.dirname(os.path.abspath(ef.__file__))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
                 "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))})
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the fuzzed server did not start (exit {self.process.wait()})")
        addresses = json.loads(line)
        self.grpc_address, self.rest_port = addresses["grpc_address"], addresses["rest_port"]
        self.rss_start = self.rss()

    def rss(self):
        assert self.process.poll() is None, f"the server process died (exit {self.process.returncode})"
        return rss_bytes(self.process.pid)

    def stop(self):
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = ServerProcess(tmp_path_factory.mktemp("fuzz_models"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def stubs(server):
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    channel = grpc.insecure_channel(server.grpc_address)
    yield prediction_service_pb2_grpc.PredictionServiceStub(channel)
    channel.close()


# ------------------------------------------------------------------ strategies

DTYPES = [1, 2, 3, 4, 5, 6, 7, 9, 10, 14, 17, 19, 22, 23, 0, 8, 20, 21, 99]
NAMES = st.sampled_from(["text", "text_b", "x", "token_ids", "inputs", "", "\x00", "ü" * 3, "a" * 300])
SIGNATURES = st.sampled_from(["", "serving_default", "pair", "scale", "count", "token_ids", "classification",
                              "regression", "nope", "\ud7ff" * 2])
MODELS = st.sampled_from(["tiny", "", "other", "tiny\x00", "t" * 500])
DIMS = st.lists(st.one_of(st.integers(0, 4), st.integers(-3, 2 ** 40)), max_size=5)


@st.composite
def tensor_protos(draw):
    from tensorflow.core.framework import tensor_pb2

    proto = tensor_pb2.TensorProto(dtype=draw(st.sampled_from(DTYPES)))
    dims = draw(DIMS)
    for size in dims:
        proto.tensor_shape.dim.add().size = size
    proto.tensor_shape.unknown_rank = draw(st.booleans()) and draw(st.booleans())
    count = draw(st.one_of(st.integers(0, 6), st.just(max(0, int(np.prod([d for d in dims if d >= 0] or [1]))) % 64)))
    kind = draw(st.sampled_from(["string_val", "int_val", "int64_val", "float_val", "bool_val", "half_val",
                                 "tensor_content", "double_val", "uint64_val"]))
    if kind == "string_val":
        proto.string_val.extend(draw(st.lists(st.binary(max_size=20), min_size=count, max_size=count)))
    elif kind == "tensor_content":
        proto.tensor_content = draw(st.binary(max_size=64))
    elif kind in ("int_val", "half_val"):
        getattr(proto, kind).extend(draw(st.lists(st.integers(-2 ** 31, 2 ** 31 - 1), min_size=count,
                                                  max_size=count)))
    elif kind == "int64_val":
        proto.int64_val.extend(draw(st.lists(st.integers(-2 ** 63, 2 ** 63 - 1), min_size=count, max_size=count)))
    elif kind == "uint64_val":
        proto.uint64_val.extend(draw(st.lists(st.integers(0, 2 ** 64 - 1), min_size=count, max_size=count)))
    elif kind == "bool_val":
        proto.bool_val.extend(draw(st.lists(st.booleans(), min_size=count, max_size=count)))
    else:
        getattr(proto, kind).extend(draw(st.lists(st.floats(width=32), min_size=count, max_size=count)))
    return proto


@st.composite
def predict_requests(draw):
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    if draw(st.integers(0, 9)):
        request.model_spec.name = draw(MODELS)
        request.model_spec.signature_name = draw(SIGNATURES)
        choice = draw(st.integers(0, 3))
        if choice == 1:
            request.model_spec.version.value = draw(st.integers(-2 ** 63, 2 ** 63 - 1))
        elif choice == 2:
            request.model_spec.version_label = draw(st.sampled_from(["stable", "canary", ""]))
    for _ in range(draw(st.integers(0, 3))):
        request.inputs[draw(NAMES)].CopyFrom(draw(tensor_protos()))
    request.output_filter.extend(draw(st.lists(st.sampled_from(["label", "y", "nope", ""]), max_size=2)))
    return request


@st.composite
def classification_requests(draw):
    from tensorflow_serving.apis import classification_pb2

    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = draw(MODELS)
    request.model_spec.signature_name = draw(SIGNATURES)
    with_context = draw(st.booleans())
    examples = (request.input.example_list_with_context.examples if with_context
                else request.input.example_list.examples)
    if with_context and draw(st.booleans()):
        # A shared context is copied into every example: sizes up to the limits, times many rows.
        context = request.input.example_list_with_context.context
        context.CopyFrom(draw(example_protos()))
        size = draw(st.sampled_from([0, 1000, 20_000, 300_000]))
        context.features.feature["big"].bytes_list.value.append(b"c" * size)
    for _ in range(draw(st.one_of(st.integers(0, 4), st.sampled_from([16, 64, 65, 200])))):
        examples.add().CopyFrom(draw(example_protos()))
    return request


@st.composite
def example_protos(draw):
    from tensorflow.core.example import example_pb2

    example = example_pb2.Example()
    for key in draw(st.lists(st.sampled_from(["text", "other", ""]), max_size=2)):
        feature = example.features.feature[key]
        which = draw(st.integers(0, 2))
        if which == 0:
            feature.bytes_list.value.extend(draw(st.lists(st.binary(max_size=12), max_size=3)))
        elif which == 1:
            feature.int64_list.value.extend(draw(st.lists(st.integers(-2 ** 63, 2 ** 63 - 1), max_size=3)))
        else:
            feature.float_list.value.extend(draw(st.lists(st.floats(width=32), max_size=3)))
    return example


JSON_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=False,
                        allow_infinity=False), st.text(max_size=12), st.just({"b64": "aGk="}), st.just({"b64": "!"}))
JSON_VALUES = st.recursive(JSON_LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                                 st.dictionaries(st.text(max_size=6), inner,
                                                                                 max_size=3)), max_leaves=20)


@st.composite
def rest_bodies(draw):
    keys = draw(st.lists(st.sampled_from(["instances", "inputs", "signature_name", "examples", "context", "x"]),
                         max_size=3, unique=True))
    body = {key: draw(SIGNATURES) if key == "signature_name" and draw(st.booleans()) else draw(JSON_VALUES)
            for key in keys}
    text = json.dumps(body)
    tail = draw(st.sampled_from(["", "", "", "garbage", "NaN", "[" * 3000, "9" * 5000, "\udcff"]))
    return (text[:-1] + ', "z": ' + tail + "}" if tail and text != "{}" else text).encode("utf-8", "surrogatepass")


# JSON strings written with escapes: any UTF-16 code unit, lone surrogates often.
_ESCAPE = st.one_of(st.integers(0, 0xFFFF), st.integers(0xD800, 0xDFFF)).map(lambda unit: "\\u%04x" % unit)
JSON_STRINGS = st.lists(st.one_of(_ESCAPE, st.sampled_from(["a", "é", "\\\\", '\\"', " ", "東"])),
                        max_size=5).map(lambda parts: '"' + "".join(parts) + '"')
ESCAPE_TEMPLATES = [  # (verb, body with %s wherever a JSON string goes)
    ("predict", '{"instances": [%s]}'),
    ("predict", '{"instances": [%s, %s]}'),
    ("predict", '{"signature_name": %s, "instances": ["a"]}'),
    ("predict", '{%s: 1, "instances": ["a"]}'),
    ("predict", '{"inputs": {%s: ["a"]}}'),
    ("predict", '{"signature_name": "pair", "instances": [{"text": %s, "text_b": %s}]}'),
    ("classify", '{"examples": [{%s: "a"}]}'),
    ("classify", '{"examples": [{"text": %s}]}'),
    ("classify", '{"examples": [{"text": [%s, "b"]}], "context": {%s: %s}}'),
    ("regress", '{"examples": [{"text": "a"}], "context": {"c": %s}}'),
    ("regress", '{"examples": [{"text": %s}], "context": {"text": {"b64": %s}}}'),
]


@st.composite
def escaped_rest_bodies(draw):
    """(verb, body): JSON text whose strings are written with \\u escapes (surrogates included)."""
    verb, template = draw(st.sampled_from(ESCAPE_TEMPLATES))
    return verb, (template % tuple(draw(JSON_STRINGS) for _ in range(template.count("%s")))).encode()


def _has_lone_surrogate(body):
    try:
        json.dumps(json.loads(body), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


@st.composite
def context_rest_bodies(draw):
    """(verb, body): REST :classify / :regress with a shared context, up to the size limits times the row limit."""
    rows = draw(st.one_of(st.integers(1, 4), st.sampled_from([64, 65, 500])))
    body = {"examples": [{"text": draw(TEXTS)}] * rows,
            "context": {"c": "x" * draw(st.sampled_from([0, 100, 20_000, 200_000])), "n": draw(st.integers(-5, 5))}}
    if draw(st.booleans()):
        body["signature_name"] = draw(st.sampled_from(["classification", "regression", "", "nope"]))
    return draw(st.sampled_from(["classify", "regress"])), json.dumps(body).encode()


# Digits of every script (Nd: "٣", "９"; No: "²", "½") mixed with ASCII ones.
OTHER_DIGITS = st.text(alphabet=st.one_of(st.characters(categories=("Nd", "No")), st.sampled_from("0123456789")),
                       min_size=1, max_size=6)


@st.composite
def digit_header_requests(draw):
    """Raw POSTs whose Content-Length (or another header) is written with digits of any script."""
    value = draw(OTHER_DIGITS)
    name = draw(st.sampled_from(["Content-Length", "content-length", "Content-Encoding", "Expect", "Connection",
                                 "Transfer-Encoding", "X-Digits"]))
    # "Connection: close" last: the last of repeated headers counts, and the test reads to the end
    head = f"POST /v1/models/tiny:predict HTTP/1.1\r\n{name}: {value}\r\nConnection: close\r\n"
    body = b'{"instances": ["a"]}'
    if name.lower() == "content-length":
        # a length the server can read gets that many bytes: the test must not wait for a body timeout
        body = b"x" * int(value) if re.fullmatch("[0-9]+", value) else body
    else:
        head += f"Content-Length: {len(body)}\r\n"
    encoding = draw(st.sampled_from(["utf-8", "latin-1"]))
    return head.encode(encoding, errors="replace") + b"\r\n" + body


# Directory names under a base path: digits of any script, signs, spaces, dots, leading zeros, long ones.
DIRECTORY_NAMES = st.one_of(
    OTHER_DIGITS,
    st.text(alphabet=st.one_of(st.sampled_from("0123456789 \t\n.-+_x"), st.characters(categories=("Nd", "No"))),
            min_size=1, max_size=22),
    st.text(alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="/\x00"), min_size=1, max_size=12),
).filter(lambda name: name not in (".", "..") and len(os.fsencode(name)) < 200)


TEXTS = st.one_of(st.text(max_size=30), st.text(alphabet=st.sampled_from("\x00\x01\x7f\u200b \t\u3000\ufffd\u0301a"),
                                                 max_size=8), st.just("FAIL"))


@st.composite
def near_valid_rest_bodies(draw):
    """Bodies shaped like real requests to real signatures, with hostile values: they reach the model."""
    signature = draw(st.sampled_from(["serving_default", "pair", "scale", "token_ids", "count"]))
    rows = draw(st.integers(1, 6))
    if signature in ("serving_default", "count"):
        column = {"text": draw(st.lists(st.one_of(TEXTS, st.just({"b64": "//4="})), min_size=rows, max_size=rows))}
    elif signature == "pair":
        column = {name: draw(st.lists(TEXTS, min_size=rows, max_size=rows)) for name in ("text", "text_b")}
    elif signature == "scale":
        number = st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-2 ** 70, 2 ** 70))
        column = {"x": draw(st.lists(st.lists(number, min_size=3, max_size=3), min_size=rows, max_size=rows))}
    else:
        width = draw(st.integers(0, 40))
        ids = st.lists(st.lists(st.integers(-2 ** 40, 2 ** 40), min_size=width, max_size=width), min_size=rows,
                       max_size=rows)
        column = {"token_ids": draw(ids)}
    if draw(st.booleans()):
        body = {"signature_name": signature, "inputs": column}
    else:
        body = {"signature_name": signature,
                "instances": [{k: v[i] for k, v in column.items()} for i in range(rows)]}
    return json.dumps(body).encode()


PATHS = st.one_of(
    st.builds(lambda m, v, verb: f"/v1/models/{m}{v}{verb}",
              st.sampled_from(["tiny", "nope", "", "tiny%00", "%ZZ", "t" * 300]),
              st.sampled_from(["", "/versions/1", "/versions/99999999999999999999999", "/labels/stable",
                               "/labels/", "/versions/-1", "/versions/01"]),
              st.sampled_from([":predict", ":classify", ":regress", "/metadata", "", ":nope", "/x/y"])),
    st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=40).map(lambda t: "/" + t),
)


# ------------------------------------------------------------------ properties


def _check_grpc(call):
    try:
        call()
        code = "OK"
    except grpc.RpcError as error:
        code = error.code().name
        assert error.details() and "Traceback" not in error.details()
    assert code in CLIENT_CODES, code


def _check_rest_status(status, payload):
    assert status < 500 or status == 503, (status, payload)
    if status >= 400:
        assert set(payload) >= {"error"} and isinstance(payload["error"], str), payload


def _rest(server, method, path, body):
    with socket.create_connection(("127.0.0.1", server.rest_port), timeout=300) as sock:
        head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {len(body)}\r\n\r\n"
        sock.sendall(head.encode("utf-8", "surrogateescape") + body)
        data = b""
        while chunk := sock.recv(1 << 16):
            data += chunk
    head, _, raw = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, (json.loads(raw) if raw and b"application/json" in head else {})


def _run_grpc_predict(server, stubs, request):
    _check_grpc(lambda: stubs.Predict(request, timeout=300))
    assert server.rss() - server.rss_start < RSS_BOUND


def _run_grpc_classify(server, stubs, request):
    _check_grpc(lambda: stubs.Classify(request, timeout=300))
    _check_grpc(lambda: stubs.Regress(request, timeout=300))
    assert server.rss() - server.rss_start < RSS_BOUND


def _run_rest(server, path, body):
    for method in ("POST", "GET"):
        status, payload = _rest(server, method, path, body if method == "POST" else b"")
        _check_rest_status(status, payload)
    assert server.rss() - server.rss_start < RSS_BOUND


@FAST
@given(request=predict_requests())
def test_fuzz_grpc_predict(server, stubs, request):
    _run_grpc_predict(server, stubs, request)


@FAST
@given(request=classification_requests())
def test_fuzz_grpc_classify_regress(server, stubs, request):
    _run_grpc_classify(server, stubs, request)


@FAST
@given(path=PATHS, body=rest_bodies())
def test_fuzz_rest_bodies_and_urls(server, path, body):
    _run_rest(server, path, body)


@FAST
@given(body=near_valid_rest_bodies())
def test_fuzz_rest_near_valid_bodies_reach_the_model_and_answer_properly(server, body):
    status, payload = _rest(server, "POST", "/v1/models/tiny:predict", body)
    _check_rest_status(status, payload)
    assert status in (200, 400, 429), (status, payload)
    assert server.rss() - server.rss_start < RSS_BOUND


@FAST
@given(head=st.binary(max_size=200))
def test_fuzz_raw_http_heads(server, head):
    with socket.create_connection(("127.0.0.1", server.rest_port), timeout=300) as sock:
        sock.sendall(head + b"\r\n\r\n")
        sock.shutdown(socket.SHUT_WR)
        data = b""
        while True:
            try:
                chunk = sock.recv(1 << 16)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
    if data:  # an answer (nothing at all is fine for an empty request)
        first, _, _ = data.partition(b"\r\n")
        status = int(first.split(b" ", 2)[1])
        assert status < 500 or status == 503, data[:300]
        assert b"application/json" in data.partition(b"\r\n\r\n")[0], data[:300]


def _run_escaped(server, verb, body):
    status, payload = _rest(server, "POST", f"/v1/models/tiny:{verb}", body)
    _check_rest_status(status, payload)
    if _has_lone_surrogate(body):
        assert status == 400 and "surrogate" in payload["error"], (body, status, payload)


def _run_context_rest(server, verb, body):
    status, payload = _rest(server, "POST", f"/v1/models/tiny:{verb}", body)
    _check_rest_status(status, payload)
    assert server.rss() - server.rss_start < RSS_BOUND


def _run_digit_header(server, data):
    with socket.create_connection(("127.0.0.1", server.rest_port), timeout=300) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(1 << 16):
            answer += chunk
    head, _, raw = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 "), (data[:200], answer[:200])  # an answer, never a closed connection
    _check_rest_status(int(head.split(b" ", 2)[1]), json.loads(raw))


def _safe_strto64(name):
    """TF Serving's reading of a version directory name, step by step as tsl's safe_strto64 (numbers.cc)
    does it: C-locale spaces, an optional '-', ASCII digits with an int64 overflow check, spaces; None
    where it returns false."""
    spaces, i = " \t\n\v\f\r", 0
    while i < len(name) and name[i] in spaces:
        i += 1
    sign = -1 if name[i:i + 1] == "-" else 1
    i += sign == -1
    if not (i < len(name) and name[i] in "0123456789"):
        return None
    result = 0
    while i < len(name) and name[i] in "0123456789":
        result = result * 10 + sign * int(name[i])
        if not -2 ** 63 <= result <= 2 ** 63 - 1:
            return None
        i += 1
    while i < len(name) and name[i] in spaces:
        i += 1
    return result if i == len(name) else None


def _run_version_names(root, names, policy="latest"):
    """Version directories named `names` (each with a settled saved_model.pb): what a poll lists."""
    from serving.server import ModelSource
    from serving.server.model_registry import ModelRegistry

    base = root / f"names-{len(os.listdir(root))}"
    base.mkdir()
    for name in set(names):
        (base / name).mkdir()
        (base / name / "saved_model.pb").write_bytes(b"")
        os.utime(base / name / "saved_model.pb", (1, 1))  # settled: not a copy in progress
    registry = ModelRegistry([ModelSource("m", str(base), version_policy=policy)], poll_interval_s=0)
    for _ in range(2):  # listing again must not fail either
        found = registry._list_versions(registry._models["m"])
    expected = {_safe_strto64(n) for n in names} - {None}
    assert set(found) == expected, (names, found)
    for version, path in found.items():
        # Of "1" and "01": TF Serving indexes the sorted names by version (the last wins) for the latest and
        # specific policies, and for `all` aspires each, its manager refusing the second (the first wins).
        same = sorted(os.fsencode(n) for n in set(names) if _safe_strto64(n) == version)
        assert os.fsencode(os.path.basename(path)) == (same[0] if policy == "all" else same[-1]), (names, found)
    return found


def test_version_directory_names_up_to_int64_max_as_tf_serving(tmp_path):
    """TF Serving parses a version directory name with safe_strto64: 19 digits up to 9223372036854775807 are a
    version, leading zeros included; one past it is not. Two names of one version: the last sorted is loaded."""
    int64_max = str(2 ** 63 - 1)
    found = _run_version_names(tmp_path, [int64_max, str(2 ** 63), "0000000000000000000000003", "9" * 19, "1",
                                          "01", "0"])
    assert sorted(found) == [0, 1, 3, 2 ** 63 - 1]
    assert os.path.basename(found[1]) == "1"
    assert os.path.basename(found[2 ** 63 - 1]) == int64_max


def test_version_directory_names_zero_negative_and_spaced_as_tf_serving(tmp_path):
    """TF Serving's safe_strto64 reads "0" as version 0, "-4" as -4 and " 2\t" as 2 (they were ignored, "0"
    silently); "+5", "5-", "- 5" and one past int64's minimum are no version. Of two names of one version the
    last sorted is loaded, except under the `all` policy, where TF Serving loads the first."""
    names = ["0", "-4", " 2\t", "+5", "5-", "- 5", str(-2 ** 63), str(-2 ** 63 - 1), "-0", "7", "07", " 7"]
    found = _run_version_names(tmp_path, names)
    assert sorted(found) == [-2 ** 63, -4, 0, 2, 7]
    assert os.path.basename(found[0]) == "0" and os.path.basename(found[7]) == "7"  # "-0" < "0"; " 7" < "07" < "7"
    assert os.path.basename(_run_version_names(tmp_path, names, policy="all")[7]) == " 7"


@FAST
@given(case=escaped_rest_bodies())
def test_fuzz_rest_unicode_escapes_and_lone_surrogates(server, case):
    _run_escaped(server, *case)


@FAST
@given(case=context_rest_bodies())
def test_fuzz_rest_classify_regress_with_a_context(server, case):
    _run_context_rest(server, *case)


@FAST
@given(data=digit_header_requests())
def test_fuzz_header_values_with_other_scripts_digits(server, data):
    _run_digit_header(server, data)


@FAST
@given(names=st.lists(DIRECTORY_NAMES, max_size=6))
def test_fuzz_version_directory_names(tmp_path_factory, names):
    _run_version_names(tmp_path_factory.getbasetemp(), names)


@pytest.mark.slow
@LONG
@given(escaped=escaped_rest_bodies(), context=context_rest_bodies(), header=digit_header_requests(),
       names=st.lists(DIRECTORY_NAMES, max_size=6))
def test_fuzz_long_run_round_2_surfaces(server, tmp_path_factory, escaped, context, header, names):
    _run_escaped(server, *escaped)
    _run_context_rest(server, *context)
    _run_digit_header(server, header)
    _run_version_names(tmp_path_factory.getbasetemp(), names)


@pytest.mark.slow
@LONG
@given(request=predict_requests(), classify=classification_requests(), path=PATHS, body=rest_bodies(),
       near_valid=near_valid_rest_bodies())
def test_fuzz_long_run_all_surfaces(server, stubs, request, classify, path, body, near_valid):
    _run_grpc_predict(server, stubs, request)
    _run_grpc_classify(server, stubs, classify)
    _run_rest(server, path, body)
    test_fuzz_rest_near_valid_bodies_reach_the_model_and_answer_properly.hypothesis.inner_test(server, near_valid)
