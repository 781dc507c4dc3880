"""TF Serving's REST API (`/v1/models/...`) over an `InferenceEngine`, on the standard library's HTTP server.

Routes (the same URLs, JSON bodies and HTTP status codes as tensorflow_model_server):

    GET  /v1/models/NAME[/versions/V | /labels/L]             model status
    GET  /v1/models/NAME[/versions/V | /labels/L]/metadata    signature metadata
    POST /v1/models/NAME[/versions/V | /labels/L]:predict     {"instances": [...]} -> {"predictions": [...]}
                                                              {"inputs": ...}      -> {"outputs": ...}
    POST /v1/models/NAME[...]:classify | :regress             {"examples": [...]}  -> {"results": [...]}
    GET  /healthz                                             liveness (200 while the process serves)
    GET  /readyz, /v1/health                                  readiness (200 once every model is loaded)
    GET  /monitoring/prometheus/metrics                       request counts/latency, batching (with metrics)

Errors answer `{"error": "message"}` with the HTTP status of the gRPC code (400, 404, 413, 429, 503, ...);
every client mistake is a 4xx, a 500 is only ever a server bug and never shows its internals.
Any method other than GET/POST under /v1/ answers 400 "Malformed request", as TF Serving does.
Strings travel as UTF-8 JSON strings, or `{"b64": "..."}` for bytes; outputs whose name ends in
`_bytes` (and strings that are not UTF-8) come back as `{"b64": ...}`.

`RestService` is the REST adapter of `InferenceEngine`: (method, path, body bytes) in,
(HTTP status, JSON payload) out, no sockets (`http_server.RestServer` adds those). JSON is
read and written by the REST codec (`json_codec`).

Example:
    >>> service = RestService(engine)                                            # doctest: +SKIP
    >>> service.handle("POST", "/v1/models/sentiment:predict", b'{"instances": ["great"]}')   # doctest: +SKIP
    (200, {'predictions': [...]})
"""

import json
import logging
import re
import time

import numpy as np

from serving.server.errors import ServingError, http_status, name_list
from serving.server.json_codec import (
    DecodeBudget,
    classify_results_json,
    decode_predict_json,
    encode_predict_json,
    examples_from_json,
    parse_json_body,
    regress_results_json,
    serialized_examples,
    signature_def_map_json,
)
from serving.server.request_validation import Limits
from serving.server.version_files import MAX_VERSION

logger = logging.getLogger(__name__)

# TF Serving's own URL patterns (model_servers/http_rest_api_util.cc), case-insensitive. RE2's \d is
# ASCII only; Python's also matches other scripts' digits, which int() would read: [0-9] here.
_PREDICTION_PATH = re.compile(
    r"/v1/models/([^/:]+)(?:(?:/versions/([0-9]+))|(?:/labels/([^/:]+)))?:(classify|regress|predict)", re.I)
_STATUS_PATH = re.compile(
    r"/v1/models(?:/([^/:]+))?(?:(?:/versions/([0-9]+))|(?:/labels/([^/:]+)))?(?:/(metadata))?", re.I)


# Where TF Serving's monitoring config puts Prometheus metrics (serving/deploy/monitoring_config.py).
METRICS_PATH = "/monitoring/prometheus/metrics"


def _route_name(method, path):
    """A low-cardinality name of the route for metrics: "predict", "status", "metadata", "health", ..."""
    match = _PREDICTION_PATH.fullmatch(path)
    if match:
        return match.group(4).lower()
    if path.startswith("/v1/models"):
        return "metadata" if path.endswith("/metadata") else "status"
    if path in ("/healthz", "/v1/healthz", "/readyz", "/v1/health"):
        return "health"
    return "metrics" if path == METRICS_PATH else "other"


class RestError(Exception):
    """A request problem found by the REST layer itself: HTTP status + message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


def _json_default(value):
    # numpy scalars and arrays inside engine results (classify/regress).
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(payload) -> bytes:
    """UTF-8 JSON of a response payload (numpy values converted).

    Text never makes it fail: a message may quote what a client sent, and a lone UTF-16
    surrogate in it (which no UTF-8 encoder takes) is written as U+FFFD. A value JSON cannot
    hold still raises TypeError / ValueError (`RestService.respond` answers those 500).
    """
    text = json.dumps(payload, default=_json_default, ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub("\ufffd", text).encode("utf-8")


JSON_TYPE = "application/json"
TEXT_TYPE = "text/plain; version=0.0.4"  # Prometheus' exposition format, the one text answer


def encode_payload(payload):
    """(content type, body bytes) of a payload: str is Prometheus text, anything else JSON (see `dumps`)."""
    if isinstance(payload, str):
        return TEXT_TYPE, payload.encode("utf-8", errors="replace")
    return JSON_TYPE, dumps(payload)


# --------------------------------------------------------------------------------------------
# Request routing: transport-independent (method, path, body) -> (HTTP status, JSON payload).
# --------------------------------------------------------------------------------------------

class RestService:
    """Answers TF Serving REST requests with an engine; no sockets (`http_server.RestServer` adds those).

    Args:
        engine: an `InferenceEngine`.
        metrics: optional `serving.server.server.ServerMetrics`.
        decode_budget_bytes: decoded JSON held at once by all requests (`json_codec.DecodeBudget`;
            default 4 x the engine's `max_request_bytes`).
    """

    def __init__(self, engine, metrics=None, decode_budget_bytes=None):
        self.engine = engine
        self.metrics = metrics
        limits = getattr(engine, "limits", None) or Limits()
        self.decode_budget = DecodeBudget(decode_budget_bytes or 4 * limits.max_request_bytes)
        self.draining = False

    def respond(self, method, path, body):
        """(http_status, content type, body bytes) for one request; never raises.

        `handle`, then the payload encoded: a payload JSON cannot hold is a server bug,
        answered 500 (logged) rather than a connection closed without an answer.
        """
        status, payload = self.handle(method, path, body)
        try:
            return (status, *encode_payload(payload))
        except (TypeError, ValueError, RecursionError):
            logger.exception("REST %s %s: the answer cannot be encoded as JSON", method, path[:200])
            return 500, JSON_TYPE, dumps({"error": "internal error (see the server log)"})

    def handle(self, method, path, body):
        """Returns (http_status, payload) for one request, payload a dict (JSON) or str (text); never raises."""
        started = time.perf_counter()
        path = path.split("?", 1)[0]
        code = "OK"
        try:
            return self._route(method, path, body)
        except RestError as error:
            code = f"HTTP_{error.status}"
            return error.status, {"error": error.message}
        except ServingError as error:
            code = error.code
            return http_status(error.code), {"error": error.message}
        except RecursionError:  # structure nested past Python's limit: the client's mistake
            code = "INVALID_ARGUMENT"
            return 400, {"error": "request is nested too deeply"}
        except Exception:  # noqa: BLE001 - one bad request must not stop the server; internals stay in the log
            code = "INTERNAL"
            logger.exception("REST %s %s failed", method, path[:200])
            return 500, {"error": "internal error (see the server log)"}
        finally:
            if self.metrics is not None:
                self.metrics.record("rest", _route_name(method, path), code, time.perf_counter() - started)

    # -- routing -----------------------------------------------------------------------------
    def _route(self, method, path, body):
        if method in ("GET", "HEAD"):
            if path == METRICS_PATH and self.metrics is not None:
                return 200, self.metrics.prometheus_text(self.engine)
            if path in ("/healthz", "/v1/healthz"):
                return 200, {"status": "draining" if self.draining else "alive"}
            if path in ("/readyz", "/v1/health"):
                if self.draining:
                    return 503, {"status": "draining", "error": "the server is shutting down"}
                if self.engine.is_ready():
                    return 200, {"status": "ready"}
                return 503, {"status": "loading", "error": "models are still loading"}
        if not path.lower().startswith("/v1/"):
            raise RestError(404, f"no such endpoint: {method} {path[:200]} (the API is under /v1/models/...)")
        if method == "POST":
            match = _PREDICTION_PATH.fullmatch(path)
            if match:
                name, version, label, verb = match.groups()
                spec = self._spec(name, version, label)
                with self.decode_budget.hold(body):  # until the decoded values are gone
                    request = parse_json_body(body)
                    # null too: TF Serving's FillSignature (util/json_tensor.cc) takes only a string
                    if "signature_name" in request and not isinstance(request["signature_name"], str):
                        raise RestError(400, "'signature_name' must be a string, got "
                                             f"{json.dumps(request['signature_name'])[:60]}")
                    return 200, getattr(self, f"_{verb.lower()}")(spec, request)
        elif method == "GET":
            match = _STATUS_PATH.fullmatch(path)
            if match:
                name, version, label, metadata = match.groups()
                if not name:
                    raise RestError(400, "Missing model name in request.")
                spec = self._spec(name, version, label)
                return 200, (self._metadata(spec) if metadata else self._status(spec))
        # TF Serving's answer for anything else under /v1/ (HEAD, OPTIONS, PUT, ... included).
        raise RestError(400, f"Malformed request: {method} {path[:200]}")

    @staticmethod
    def _spec(name, version, label):
        from urllib.parse import unquote

        if version is not None:
            digits = version.lstrip("0") or "0"  # absl::SimpleAtoi, as TF Serving: leading zeros are fine
            if len(digits) > 19 or int(digits) > MAX_VERSION:
                raise RestError(400, f"Failed to convert version: {version[:40]} is out of the int64 range")
            version = int(digits)
        return {"model_name": unquote(name), "version": version,
                "version_label": unquote(label) if label else None}

    # -- status and metadata ------------------------------------------------------------------
    def _status(self, spec):
        # Exactly TF Serving's JSON: int64 version as a string, enums by name.
        items = self.engine.model_status(spec["model_name"], spec["version"], spec["version_label"])
        return {"model_version_status": [
            {"version": str(item["version"]), "state": item["state"],
             "status": {"error_code": item["error_code"], "error_message": item["error_message"]}}
            for item in items]}

    def _metadata(self, spec):
        version, sig_map = self.engine.metadata(spec["model_name"], spec["version"], spec["version_label"])
        return {"model_spec": {"name": spec["model_name"], "signature_name": "", "version": str(version)},
                "metadata": {"signature_def": signature_def_map_json(sig_map)}}

    # -- predict / classify / regress -----------------------------------------------------------
    @staticmethod
    def _check_keys(request, allowed):
        unknown = set(request) - set(allowed)
        if unknown:
            raise RestError(400, f"unknown key(s) in request body: {name_list(unknown)} "
                                 f"(expected {', '.join(allowed)})")

    def _predict(self, spec, request):
        self._check_keys(request, ("signature_name", "instances", "inputs"))
        engine = self.engine
        signature_name = request.get("signature_name") or ""
        # One version for the whole request: the JSON is decoded with the signature that runs it.
        with engine.servable(spec["model_name"], spec["version"], spec["version_label"]) as servable:
            signature = engine.signature(servable, signature_name)
            inputs, columnar = decode_predict_json(request, signature.inputs, engine.limits)
            outputs = engine.run(servable, signature_name, inputs)
        return encode_predict_json(outputs, columnar)

    def _examples(self, request):
        self._check_keys(request, ("signature_name", "examples", "context"))
        examples, context = examples_from_json(request)
        return serialized_examples(examples, context, self.engine.limits)

    def _classify(self, spec, request):
        _, _, results = self.engine.classify_examples(
            spec["model_name"], version=spec["version"], version_label=spec["version_label"],
            signature_name=request.get("signature_name") or None, serialized=self._examples(request))
        return classify_results_json(results)

    def _regress(self, spec, request):
        _, _, results = self.engine.regress_examples(
            spec["model_name"], version=spec["version"], version_label=spec["version_label"],
            signature_name=request.get("signature_name") or None, serialized=self._examples(request))
        return regress_results_json(results)
