"""`ServingClient`: one Python client for TF Serving's gRPC and REST APIs (ours or tensorflow_model_server).

It speaks the stock protocol only (tensorflow_serving.apis protos over gRPC, TF Serving
JSON over REST), so the same calls work against `bert-keras serve` and against a real
`tensorflow/serving` container. Answers come back as numpy arrays keyed by output name.

Example:

    from serving.client import ServingClient

    with ServingClient("127.0.0.1:8500", "sentiment") as client:          # gRPC
        out = client.predict(["great movie", "dull plot"])                 # the signature's one text input
        print(out["label"], out["probabilities"])
    rest = ServingClient("127.0.0.1:8501", "sentiment", protocol="rest")
    rest.predict({"text": ["great movie"]}); rest.status(); rest.metadata()

Errors raise `ServingClientError` with `.code` (the gRPC code name, e.g. "INVALID_ARGUMENT";
REST statuses are mapped back to the same names) and the server's message.
"""

import base64
import contextlib
import http.client
import json
import re
import socket
import ssl
import threading
import time
from urllib.parse import quote, urlsplit

import numpy as np

DEFAULT_SIGNATURE = "serving_default"

# HTTP status -> gRPC code name (the inverse of TF Serving's mapping; 413 = body over the limit).
HTTP_CODES = {
    400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
    405: "UNIMPLEMENTED", 408: "DEADLINE_EXCEEDED", 409: "ABORTED", 411: "INVALID_ARGUMENT",
    413: "RESOURCE_EXHAUSTED", 414: "INVALID_ARGUMENT", 431: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED", 499: "CANCELLED", 500: "INTERNAL", 501: "UNIMPLEMENTED",
    503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
}

class ServingClientError(Exception):
    """A request failed: `.code` is the gRPC code name, `.message` the server's text, `.http_status` (REST)."""

    def __init__(self, code, message, http_status=None):
        super().__init__(f"{code}: {message}" if http_status is None else f"{code} (HTTP {http_status}): {message}")
        self.code = code
        self.message = message
        self.http_status = http_status


# TF Serving's answer, under --enable_batching, to a request of more rows than its max_batch_size.
_TASK_TOO_LARGE = re.compile(r"Task size (\d+) is larger than maximum input batch size (\d+)")


def _parts_within_batch_limit(error, named):
    """`named` inputs cut into requests of at most the server's max_batch_size rows, when `error`
    is the batching server's refusal of a larger request; else None (the error stands). Each part
    keeps its input's form (a list stays a list of the same values, an array an array)."""
    found = _TASK_TOO_LARGE.search(error.message or "") if error.code == "INVALID_ARGUMENT" else None
    if found is None:
        return None
    limit = int(found.group(2))
    values = {name: value if isinstance(value, (list, tuple, np.ndarray)) else np.asarray(value)
              for name, value in named.items()}
    rows = {len(value) if np.ndim(value) else 0 for value in values.values()}
    if limit < 1 or len(rows) != 1:
        return None
    total = rows.pop()
    if total <= limit:
        return None
    return [{name: value[start:start + limit] for name, value in values.items()} for start in range(0, total, limit)]


def _join_parts(answers):
    """The answers of a request sent in parts, as one answer. An output padded per request to its
    longest row (a tagger's entities `[B, E]`) is padded to the widest part with the exports' own
    padding: "" for strings, -1 for integers, 0 for floats, False for booleans."""
    joined = {}
    for name in answers[0]:
        parts = [np.asarray(answer[name]) for answer in answers]
        widest = np.max([part.shape[1:] for part in parts], axis=0) if parts[0].ndim > 1 else None
        if widest is not None:
            kind = parts[0].dtype.kind
            fill = b"" if kind in "OSU" else -1 if kind in "iu" else False if kind == "b" else 0
            parts = [np.pad(part, [(0, 0)] + [(0, int(w) - d) for w, d in zip(widest, part.shape[1:])],
                            constant_values=fill) for part in parts]
        joined[name] = np.concatenate(parts)
    return joined


def _as_string_array(values):
    array = np.asarray(values, dtype=object)
    flat = [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in array.ravel()]
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(array.shape)


def to_numpy(value, dtype_name=None):
    """Array-like -> numpy; `dtype_name` ("DT_INT32", ...) casts, strings become object arrays of bytes."""
    if dtype_name == "DT_STRING":
        return _as_string_array(value)
    array = np.asarray(value)
    if array.dtype.kind in "USO":
        return _as_string_array(value)
    if dtype_name:
        from tensorflow.core.framework import types_pb2

        from serving.server.signatures import numpy_dtype

        return array.astype(numpy_dtype(types_pb2.DataType.Value(dtype_name)), copy=False)
    return array


def _spec(name, info):
    from tensorflow.core.framework import types_pb2

    from serving.server.signatures import TensorSpecInfo

    return TensorSpecInfo(name=name, dtype=types_pb2.DataType.Value(info.get("dtype", "DT_INVALID")),
                          shape=None if info.get("shape") is None else tuple(info["shape"]))


def _example_json(example):
    def convert(value):
        if isinstance(value, bytes):
            try:
                return value.decode("utf-8")
            except UnicodeDecodeError:
                return {"b64": base64.b64encode(value).decode("ascii")}
        if isinstance(value, (list, tuple, np.ndarray)):
            return [convert(v) for v in value]
        if isinstance(value, np.generic):
            return value.item()
        return value

    return {key: convert(value) for key, value in example.items()}


def _signatures_from_json(signature_defs):
    """SignatureDefMap JSON (TF Serving's metadata) -> {name: {method_name, inputs, outputs}} with plain shapes."""
    def tensors(infos):
        out = {}
        for name, info in (infos or {}).items():
            shape = info.get("tensor_shape", {})
            dims = None if shape.get("unknown_rank") else [int(d.get("size", -1)) for d in shape.get("dim", [])]
            out[name] = {"dtype": info.get("dtype", "DT_INVALID"), "shape": dims}
        return out

    return {name: {"method_name": sig.get("method_name", ""), "inputs": tensors(sig.get("inputs")),
                   "outputs": tensors(sig.get("outputs"))}
            for name, sig in signature_defs.items()}


# gRPC target schemes (grpc/doc/naming.md): such an address is gRPC's to resolve, not host:port.
_GRPC_SCHEMES = ("dns", "unix", "unix-abstract", "ipv4", "ipv6", "vsock")


def _host_port(address, protocol):
    """`(host, port)` of a "host:port" address ("[::1]:8500" too); ValueError naming the address
    when there is no port or it is not 1-65535 (gRPC dialled port 443 for "127.0.0.1", and port
    99999 modulo 65536). A gRPC target with a scheme (`unix:/tmp/socket`, `dns:///host:port`) is
    gRPC's own syntax: None."""
    if protocol == "grpc" and address.partition(":")[0] in _GRPC_SCHEMES:
        return None
    host, _, port = address.rpartition(":")
    default = 8501 if protocol == "rest" else 8500
    if not host or not (port.isascii() and port.isdigit()):  # "²".isdigit() is True; int() refuses it
        raise ValueError(f"server address {address!r} has no port: give host:port, e.g. 127.0.0.1:{default} "
                         "(TF Serving's ports: 8500 gRPC, 8501 REST)")
    if not 1 <= int(port) <= 65535:
        raise ValueError(f"server address {address!r}: port {port} is not a TCP port (1-65535)")
    return host.strip("[]"), int(port)


class CertificateError(ValueError):
    """The `root_certificates` file holds no PEM certificate."""


class ServerConnectionError(Exception):
    """`connect` found no signature to call: the message names the protocol, the address and the server's answer."""


def connect(address=None, model_name=None, *, rest=False, signature_name=DEFAULT_SIGNATURE, **options):
    """A `ServingClient` and the signature it calls (`{"inputs": ..., "outputs": ...}`), asked of the server now.

    Args:
        address: "host:port"; None: 127.0.0.1:8500 (gRPC), or 127.0.0.1:8501 with `rest`. An
            http(s):// address can only be REST.
        model_name: the model to query.
        rest: use the REST API instead of gRPC.
        signature_name: the signature to look up (and `predict`'s default).
        **options: the other `ServingClient` arguments (`version`, `version_label`, `timeout`, TLS, ...).

    Raises:
        ServerConnectionError: the server did not answer the metadata request (UNAVAILABLE: is a
            server running there?), or lacks the model or the signature.
        ValueError / OSError: bad options, an unreadable certificate file.
    """
    rest = rest or (address or "").startswith(("http://", "https://"))
    protocol = "rest" if rest else "grpc"
    address = address or ("127.0.0.1:8501" if rest else "127.0.0.1:8500")
    client = ServingClient(address, model_name, protocol=protocol, signature_name=signature_name, **options)
    try:
        return client, client.signature(signature_name)
    except ServingClientError as error:
        hint = ""
        if error.code == "UNAVAILABLE":
            hint = (f" (is `bert-keras serve` running on {address}? "
                    + ("REST is its --rest-port, gRPC its --port; a gRPC port takes no --rest)" if rest
                       else "a REST port needs --rest)"))
        elif error.code == "NOT_FOUND" and _unknown_model(error.message, model_name):
            # Neither server lists its models to a client: say where the names are.
            hint = (f" (no model named {model_name!r} is served there: --model-name / model_name= is a name the "
                    "server serves, which `bert-keras serve` prints after 'models:' and tensorflow_model_server "
                    "takes from its --model_name or models.config)")
        raise ServerConnectionError(f"{protocol} {address}: {error.code}: {error.message}{hint}") from None


def _unknown_model(message, model_name):
    """True when a NOT_FOUND answer is about the model's name, not one of its versions: the embedded
    server's "model 'x' not found", TF Serving's "Servable not found for request: Latest(x)" (gRPC) or
    "Could not find any versions of model x" (its REST status)."""
    return message in (f"model '{model_name}' not found", f"Servable not found for request: Latest({model_name})",
                       f"Could not find any versions of model {model_name}")


class ServingClient:
    """A TF Serving client (gRPC or REST) for one model.

    Args:
        address: "host:port" of the server's gRPC port (protocol="grpc") or REST port (protocol="rest";
            "http://host:port" or "https://host:port" also accepted).
        model_name: the model to query.
        protocol: "grpc" or "rest".
        version: ask for this version (int) instead of the server's latest; a negative one over gRPC
            only (TF Serving's REST paths take digits).
        version_label: ask for this version label (e.g. "stable") instead; not with `version`.
        signature_name: signature used by `predict` when none is given.
        timeout: seconds per request (gRPC deadline / socket timeout).
        root_certificates: PEM file (path or bytes) of the CA that signed the server's certificate;
            turns on TLS. `tls=True` uses the system's CAs instead.
        tls: force TLS on/off (default: on when root_certificates is given or the URL is https).
        server_name: host name to check the certificate against (default: the address's host).
        max_message_bytes: largest gRPC response accepted.
    """

    def __init__(self, address, model_name, *, protocol="grpc", version=None, version_label=None,
                 signature_name=DEFAULT_SIGNATURE, timeout=30.0, root_certificates=None, tls=None,
                 server_name=None, max_message_bytes=256 << 20):
        if protocol not in ("grpc", "rest"):
            raise ValueError(f"protocol must be 'grpc' or 'rest', got {protocol!r}")
        if version is not None and version_label is not None:
            raise ValueError("give a version or a version_label, not both")
        self.protocol = protocol
        self.model_name = model_name
        self.version = None if version is None else int(version)
        if protocol == "rest" and self.version is not None and self.version < 0:
            # TF Serving's REST paths read `/versions/(\d+)`: the server answered "Malformed request: GET
            # /v1/models/NAME/versions/-1/metadata", which names neither the version nor a way to it.
            raise ValueError(f"version={self.version}: TF Serving's REST API takes versions of digits only "
                             f"(/versions/{self.version} is a malformed request); a negative version is asked "
                             "for over gRPC, or by its version label")
        self.version_label = version_label
        self.signature_name = signature_name
        if timeout is not None and not 0 < timeout < float("inf"):
            # 0 was a deadline already passed (gRPC) or a non-blocking socket (REST: "Operation
            # now in progress", read as an unreachable server).
            raise ValueError(f"timeout must be a number of seconds above 0 (None: no deadline), got {timeout!r}")
        self.timeout = timeout
        if "://" in address:
            parts = urlsplit(address)
            if tls is None:
                tls = parts.scheme == "https"
            address = parts.netloc
        self.address = address
        host_port = _host_port(address, protocol)
        if isinstance(root_certificates, str):
            path = root_certificates
            with open(path, "rb") as f:
                root_certificates = f.read()
            if b"-----BEGIN CERTIFICATE-----" not in root_certificates:
                # gRPC logged "Could not load any root certificate" and answered UNAVAILABLE
                # ("is a server running?"); ssl said "no start line".
                raise CertificateError(f"{path} holds no PEM certificate (a '-----BEGIN CERTIFICATE-----' block): give "
                                 "the CA certificate that signed the server's (e.g. bert-keras serve --tls-cert's CA)")
        self.tls = bool(root_certificates) if tls is None else bool(tls)
        self._root_certificates = root_certificates
        self._server_name = server_name
        self._metadata = None
        self.metadata_version = None  # the version that answered the last metadata() call
        self._metadata_lock = threading.Lock()
        if protocol == "grpc":
            self._open_grpc(max_message_bytes)
        else:
            self._local = threading.local()
            self._connections = []
            self._connections_lock = threading.Lock()
            self._host, self._port = host_port
            self._ssl_context = None
            if self.tls:
                self._ssl_context = ssl.create_default_context(cadata=root_certificates.decode("ascii")
                                                               if root_certificates else None)

    # -- connection ---------------------------------------------------------------------------
    def _open_grpc(self, max_message_bytes):
        import grpc
        from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc

        self._grpc = grpc
        options = [("grpc.max_receive_message_length", max_message_bytes),
                   ("grpc.max_send_message_length", max_message_bytes)]
        self._grpc_options, self._grpc_credentials = options, None
        if self.tls:
            if self._server_name:
                options.append(("grpc.ssl_target_name_override", self._server_name))
            self._grpc_credentials = grpc.ssl_channel_credentials(root_certificates=self._root_certificates)
            self._channel = grpc.secure_channel(self.address, self._grpc_credentials, options=options)
        else:
            self._channel = grpc.insecure_channel(self.address, options=options)
        self._prediction = prediction_service_pb2_grpc.PredictionServiceStub(self._channel)
        self._models = model_service_pb2_grpc.ModelServiceStub(self._channel)

    def _connection(self):
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self.tls:
                conn = _HTTPSConnection(self._host, self._port, timeout=self.timeout,
                                        context=self._ssl_context, server_name=self._server_name)
            else:
                conn = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
            self._local.conn = conn
            with self._connections_lock:
                self._connections.append(conn)
        return conn

    def _drop_connection(self):
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def close(self):
        """Closes the channel / connections."""
        if self.protocol == "grpc":
            self._channel.close()
        else:
            with self._connections_lock:
                for conn in self._connections:
                    conn.close()
                self._connections.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def wait_ready(self, timeout_s=60.0, interval_s=0.2):
        """Polls `status()` until a version is AVAILABLE; returns the status list or raises ServingClientError."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                status = self.status()
                if any(entry["state"] == "AVAILABLE" for entry in status):
                    return status
                last = ServingClientError("UNAVAILABLE", f"model '{self.model_name}': no version AVAILABLE yet "
                                                         f"({status})")
            except ServingClientError as error:
                last = error
            if time.monotonic() >= deadline:
                raise last
            time.sleep(interval_s)

    # -- paths / specs --------------------------------------------------------------------------
    def _path(self, suffix=""):
        path = f"/v1/models/{quote(self.model_name, safe='')}"
        if self.version is not None:
            path += f"/versions/{self.version}"
        elif self.version_label is not None:
            path += f"/labels/{quote(self.version_label, safe='')}"
        return path + suffix

    def _fill_spec(self, model_spec, signature_name=None):
        model_spec.name = self.model_name
        if self.version is not None:
            model_spec.version.value = self.version
        elif self.version_label is not None:
            model_spec.version_label = self.version_label
        if signature_name:
            model_spec.signature_name = signature_name

    # -- transport ------------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def async_sender(self):
        """Async context manager giving `send(prepared) -> awaitable` over a `grpc.aio` channel.

        For many requests in flight from one asyncio loop (`serving.loadtest`);
        same address, TLS, message limits and deadline as this client. gRPC
        errors raise `grpc.aio.AioRpcError` (`.code()`, `.details()`).

        Example:

            async with client.async_sender() as send:
                response = await send(client.prepare_predict(["great movie"]))
        """
        if self.protocol != "grpc":
            raise ValueError("async_sender is for gRPC clients; REST clients use send()")
        from tensorflow_serving.apis import prediction_service_pb2_grpc

        aio = self._grpc.aio
        if self._grpc_credentials is not None:
            channel = aio.secure_channel(self.address, self._grpc_credentials, options=self._grpc_options)
        else:
            channel = aio.insecure_channel(self.address, options=self._grpc_options)
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        try:
            yield lambda prepared: stub.Predict(prepared, timeout=self.timeout)
        finally:
            await channel.close()

    def _grpc_call(self, method, request):
        try:
            return method(request, timeout=self.timeout)
        except self._grpc.RpcError as error:
            code = error.code()
            raise ServingClientError(code.name if code else "UNKNOWN", error.details() or str(error)) from None

    def _http(self, method, path, payload=None, body=None):
        """One REST request -> parsed JSON; errors raise ServingClientError. Reconnects once on a stale socket."""
        if payload is not None:
            body = json.dumps(payload).encode("utf-8")
        headers = {"Content-Type": "application/json"} if body is not None else {}
        for attempt in (0, 1):
            conn = self._connection()
            reused = conn.sock is not None
            try:
                status, close, data = self._exchange(conn, method, path, body, headers)
                break
            except socket.timeout:
                self._drop_connection()
                raise ServingClientError("DEADLINE_EXCEEDED", f"no answer from {self.address} within "
                                                              f"{self.timeout} s") from None
            except (http.client.RemoteDisconnected, http.client.BadStatusLine, ConnectionError) as error:
                self._drop_connection()
                if reused and attempt == 0:
                    continue  # a keep-alive connection the server had closed: retry on a new one
                if type(error) is http.client.BadStatusLine:
                    # Bytes that are no HTTP/1.1 status line: an HTTP/2 (gRPC) port answers with frames.
                    raise ServingClientError(
                        "UNAVAILABLE", f"{self.address} does not answer in HTTP/1.1 (no status line, "
                        f"{len(str(error))} other bytes): a gRPC port? REST is the server's REST port "
                        "(bert-keras serve --rest-port, TF Serving's 8501)") from None
                raise ServingClientError("UNAVAILABLE", f"{self.address}: connection lost: {error}") from None
            except OSError as error:
                self._drop_connection()
                raise ServingClientError("UNAVAILABLE", f"cannot reach {self.address}: "
                                                        f"{error.strerror or error}") from None
        if close:
            self._drop_connection()
        try:
            parsed = json.loads(data) if data else {}
        except ValueError:
            parsed = {"error": data[:200].decode("utf-8", errors="replace")}
        if status != 200:
            message = parsed.get("error", "") if isinstance(parsed, dict) else str(parsed)
            raise ServingClientError(HTTP_CODES.get(status, "UNKNOWN"), message or f"HTTP {status}",
                                     http_status=status)
        return parsed

    @staticmethod
    def _exchange(conn, method, path, body, headers):
        try:
            conn.request(method, path, body=body, headers=headers)
        except (BrokenPipeError, ConnectionResetError):
            # The server may have answered before reading the whole body (413: body over the
            # limit) and closed its side: its answer is still readable.
            if conn.sock is None:
                raise
        response = conn.getresponse()
        data = response.read()
        return response.status, response.getheader("Connection", "").lower() == "close", data

    # -- metadata and status ------------------------------------------------------------------
    def metadata(self, refresh=False):
        """{signature name: {"method_name", "inputs": {name: {"dtype", "shape"}}, "outputs": {...}}}.

        Shapes are lists with -1 for unknown sizes (None for unknown rank); dtypes are TF names
        ("DT_STRING", "DT_FLOAT", ...). Cached; `refresh=True` asks the server again.
        """
        with self._metadata_lock:
            if self._metadata is not None and not refresh:
                return self._metadata
        if self.protocol == "grpc":
            from google.protobuf import json_format
            from tensorflow_serving.apis import get_model_metadata_pb2

            request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
            self._fill_spec(request.model_spec)
            response = self._grpc_call(self._prediction.GetModelMetadata, request)
            signatures = get_model_metadata_pb2.SignatureDefMap()
            response.metadata["signature_def"].Unpack(signatures)
            defs = json_format.MessageToDict(signatures, preserving_proto_field_name=True)
            version = response.model_spec.version.value if response.model_spec.HasField("version") else None
        else:
            body = self._http("GET", self._path("/metadata"))
            defs = body.get("metadata", {}).get("signature_def", {})
            version = body.get("model_spec", {}).get("version")
        result = _signatures_from_json(defs.get("signature_def", {}))
        with self._metadata_lock:
            self._metadata = result
            self.metadata_version = int(version) if version not in (None, "") else None
        return result

    def signature(self, signature_name=None):
        """The metadata of one signature (default: the client's); raises ServingClientError if absent."""
        name = signature_name or self.signature_name
        signatures = self.metadata()
        if name not in signatures:
            raise ServingClientError("INVALID_ARGUMENT", f"model '{self.model_name}' has no signature '{name}' "
                                                         f"(signatures: {', '.join(sorted(signatures))})")
        return signatures[name]

    def status(self):
        """[{"version": int, "state": "AVAILABLE"|..., "error_code": "OK"|..., "error_message": str}, ...]."""
        if self.protocol == "grpc":
            from tensorflow_serving.apis import get_model_status_pb2

            request = get_model_status_pb2.GetModelStatusRequest()
            self._fill_spec(request.model_spec)
            response = self._grpc_call(self._models.GetModelStatus, request)
            return [{"version": int(s.version),
                     "state": get_model_status_pb2.ModelVersionStatus.State.Name(s.state),
                     "error_code": _error_code_name(s.status.error_code),
                     "error_message": s.status.error_message} for s in response.model_version_status]
        body = self._http("GET", self._path())
        return [{"version": int(s.get("version", 0)), "state": s.get("state", "UNKNOWN"),
                 "error_code": s.get("status", {}).get("error_code", "OK"),
                 "error_message": s.get("status", {}).get("error_message", "")}
                for s in body.get("model_version_status", [])]

    # -- predict ------------------------------------------------------------------------------
    def _named_inputs(self, inputs, signature_name):
        """Texts (str or list) -> {the signature's single string input: texts}; dicts pass through."""
        if isinstance(inputs, dict):
            return inputs
        texts = [inputs] if isinstance(inputs, (str, bytes)) else list(inputs)
        sig_inputs = self.signature(signature_name)["inputs"]
        strings = [name for name, info in sig_inputs.items() if info["dtype"] == "DT_STRING"]
        if len(sig_inputs) != 1 or len(strings) != 1:
            raise ValueError(f"signature '{signature_name or self.signature_name}' of model '{self.model_name}' "
                             f"has inputs {sorted(sig_inputs)}: pass a dict of input name -> values")
        return {strings[0]: texts}

    def prepare_predict(self, inputs, signature_name=None):
        """Builds a predict request once (for sending it many times, e.g. load tests).

        Returns a PredictRequest (gRPC) or (path, JSON body bytes) (REST); send it with `send`.
        """
        signature_name = signature_name or self.signature_name
        named = self._named_inputs(inputs, signature_name)
        if self.protocol == "grpc":
            from tensorflow_serving.apis import predict_pb2

            from serving.server.tensor_proto import proto_from_ndarray

            request = predict_pb2.PredictRequest()
            self._fill_spec(request.model_spec, signature_name)
            dtypes = self._input_dtypes(signature_name, named)
            for name, value in named.items():
                request.inputs[name].CopyFrom(proto_from_ndarray(to_numpy(value, dtypes.get(name))))
            return request
        from serving.server.json_codec import ndarray_to_json

        dtypes = self._input_dtypes(signature_name, named)
        payload = {"signature_name": signature_name,
                   "inputs": {name: ndarray_to_json(to_numpy(value, dtypes.get(name)), name)
                              for name, value in named.items()}}
        return self._path(":predict"), json.dumps(payload).encode("utf-8")

    def _input_dtypes(self, signature_name, named):
        # Cast to the signature's dtypes when known (a Python int list is int64, the input may be int32);
        # unknown names are sent as given, so the server names the problem.
        try:
            sig_inputs = self.signature(signature_name)["inputs"]
        except ServingClientError:
            return {}
        return {name: sig_inputs[name]["dtype"] for name in named if name in sig_inputs}

    def send(self, prepared):
        """Sends a `prepare_predict` request; returns the raw answer (PredictResponse or parsed JSON)."""
        if self.protocol == "grpc":
            return self._grpc_call(self._prediction.Predict, prepared)
        path, body = prepared
        return self._http("POST", path, body=body)

    def predict(self, inputs, signature_name=None):
        """Runs a predict signature; returns {output name: np.ndarray} (strings as bytes objects).

        Args:
            inputs: {input name: array-like} (one entry per signature input, batch dim first), or a
                text / list of texts when the signature has one string input.
            signature_name: default: the client's `signature_name` ("serving_default").
        """
        signature_name = signature_name or self.signature_name
        try:
            raw = self.send(self.prepare_predict(inputs, signature_name))
        except ServingClientError as error:
            parts = _parts_within_batch_limit(error, self._named_inputs(inputs, signature_name))
            if parts is None:
                raise
            return _join_parts([self.predict(part, signature_name) for part in parts])
        if self.protocol == "grpc":
            from serving.server.tensor_proto import ndarray_from_proto

            return {name: ndarray_from_proto(proto, name) for name, proto in raw.outputs.items()}
        outputs = raw.get("outputs")
        sig_outputs = self.signature(signature_name)["outputs"]
        if not isinstance(outputs, dict) or set(outputs) - set(sig_outputs):
            # TF Serving returns a single output without its name.
            (name,) = sig_outputs if len(sig_outputs) == 1 else (None,)
            if name is None:
                raise ServingClientError("INTERNAL", f"cannot match REST outputs to signature outputs "
                                                     f"{sorted(sig_outputs)}")
            outputs = {name: outputs}
        from serving.server.json_codec import json_to_ndarray

        return {name: json_to_ndarray(value, _spec(name, sig_outputs.get(name, {})), f"output '{name}'")
                for name, value in outputs.items()}

    # -- classify / regress -------------------------------------------------------------------
    def _examples_request(self, request, examples, signature_name):
        from serving.server.json_codec import example_from_features

        self._fill_spec(request.model_spec, signature_name)
        from serving.server.errors import ServingError

        for index, example in enumerate(examples):
            try:
                request.input.example_list.examples.append(example_from_features(example, f"example {index}"))
            except ServingError as error:  # a value that has no tf.Example form: nothing was sent
                raise ServingClientError(error.code, error.message) from None
        return request

    def _examples_signature(self, signature_name, method):
        """The signature a classify / regress call names: `signature_name`, else serving_default when its
        method is `method`, else the model's one signature of that method (the exports' "classification",
        "regression"), found in its metadata. A server, TF Serving as the embedded one, reads no name
        as serving_default and refuses it when it is a predict signature."""
        if signature_name:
            return signature_name
        signatures = self.metadata()
        if signatures.get(DEFAULT_SIGNATURE, {}).get("method_name") == method:
            return None
        named = sorted(name for name, sig in signatures.items() if sig.get("method_name") == method)
        return named[0] if len(named) == 1 else None  # none or several: the server's error names them

    def classify(self, examples, signature_name=None):
        """Classifies tf.Example-like dicts; returns one [(label, score), ...] list per example.

        Args:
            examples: list of {feature name: str | bytes | int | float | list}, e.g. [{"text": "great"}].
            signature_name: a classify signature (default: serving_default when it is one, else the model's
                only classify signature, "classification" in the exported models).
        """
        signature_name = self._examples_signature(signature_name, "tensorflow/serving/classify")
        if self.protocol == "grpc":
            from tensorflow_serving.apis import classification_pb2

            request = self._examples_request(classification_pb2.ClassificationRequest(), examples, signature_name)
            response = self._grpc_call(self._prediction.Classify, request)
            return [[(c.label, float(c.score)) for c in classes.classes]
                    for classes in response.result.classifications]
        payload = {"examples": [_example_json(e) for e in examples]}
        if signature_name:
            payload["signature_name"] = signature_name
        body = self._http("POST", self._path(":classify"), payload)
        return [[(label, float(score)) for label, score in result] for result in body.get("results", [])]

    def regress(self, examples, signature_name=None):
        """Regresses tf.Example-like dicts; returns a float32 array with one value per example
        (`signature_name` as in `classify`: default serving_default or the only regress signature)."""
        signature_name = self._examples_signature(signature_name, "tensorflow/serving/regress")
        if self.protocol == "grpc":
            from tensorflow_serving.apis import regression_pb2

            request = self._examples_request(regression_pb2.RegressionRequest(), examples, signature_name)
            response = self._grpc_call(self._prediction.Regress, request)
            return np.array([r.value for r in response.result.regressions], dtype=np.float32)
        payload = {"examples": [_example_json(e) for e in examples]}
        if signature_name:
            payload["signature_name"] = signature_name
        body = self._http("POST", self._path(":regress"), payload)
        return np.asarray(body.get("results", []), dtype=np.float32)


class _HTTPSConnection(http.client.HTTPSConnection):
    """HTTPS that checks the certificate against `server_name` (when given) instead of the host it dials."""

    def __init__(self, host, port, *, server_name=None, **kwargs):
        super().__init__(host, port, **kwargs)
        self._server_name = server_name

    def connect(self):
        http.client.HTTPConnection.connect(self)
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self._server_name or self.host)


def _error_code_name(number):
    try:
        from tensorflow.core.protobuf import error_codes_pb2

        return error_codes_pb2.Code.Name(number)
    except (ImportError, ValueError):
        return str(number)
