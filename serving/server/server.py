"""`EmbeddedServer`: an `InferenceEngine` behind TF Serving's gRPC and REST APIs, with TLS and graceful drain.

What `tensorflow_model_server --port 8500 --rest_api_port 8501` offers, in-process:
PredictionService + ModelService + grpc.health.v1 on the gRPC port, `/v1/models/...`
(and Prometheus metrics at /monitoring/prometheus/metrics) on the REST port. Port 0 picks a free port (read `grpc_port` / `rest_port` back).
SIGTERM / SIGINT (with `serve_until_signal`) stop accepting, let in-flight requests
finish, stop the engine and return, so a supervisor (Kubernetes, systemd) can roll
the server without failing requests.

Example:

    from serving.server.engine import InferenceEngine, ModelSource
    from serving.server.server import EmbeddedServer

    engine = InferenceEngine([ModelSource("sentiment", "models/sentiment")])
    server = EmbeddedServer(engine, grpc_port=0, rest_port=0).start()
    print(server.grpc_address, server.rest_url)
    server.stop(grace_s=5)
"""

import dataclasses
import logging
import signal
import ssl
import sys
import threading
import time
from concurrent import futures

import grpc

from serving.server.http_server import RestServer

logger = logging.getLogger(__name__)

DEFAULT_MAX_REQUEST_BYTES = 64 << 20


class ServerMetrics:
    """Requests answered and their latency, by transport / method / status code, as Prometheus text.

    Served by the REST port at /monitoring/prometheus/metrics (where TF Serving's monitoring
    config puts its metrics), together with the engine's batching counters, so batching can be
    tuned from outside: `rows_total / batches_total` is the average batch the model sees; the
    `batching_queued_requests` gauge counts the requests waiting in the batch queue now.

    Example:
        >>> metrics = ServerMetrics()
        >>> metrics.record("grpc", "Predict", "OK", 0.004)
        >>> metrics.snapshot()[("grpc", "Predict", "OK")]
        (1, 0.004)
    """

    PREFIX = "bert_keras_serving"

    def __init__(self):
        self._lock = threading.Lock()
        self._counts = {}

    def record(self, transport, method, code, seconds):
        key = (transport, method, code)
        with self._lock:
            count, total = self._counts.get(key, (0, 0.0))
            self._counts[key] = (count + 1, total + seconds)

    def snapshot(self):
        """{(transport, method, code): (requests, seconds)}."""
        with self._lock:
            return dict(self._counts)

    def prometheus_text(self, engine):
        """Prometheus exposition format (text/plain; version=0.0.4)."""
        p = self.PREFIX
        lines = [f"# HELP {p}_requests_total Requests answered, by transport, method and status code.",
                 f"# TYPE {p}_requests_total counter"]
        snapshot = sorted(self.snapshot().items())
        for (transport, method, code), (count, _) in snapshot:
            lines.append(f'{p}_requests_total{{transport="{transport}",method="{method}",code="{code}"}} {count}')
        lines += [f"# HELP {p}_request_seconds_total Time spent answering requests (server side).",
                  f"# TYPE {p}_request_seconds_total counter"]
        for (transport, method, code), (_, seconds) in snapshot:
            lines.append(f'{p}_request_seconds_total{{transport="{transport}",method="{method}",code="{code}"}} '
                         f"{seconds:.6f}")
        stats = getattr(engine, "batching_stats", lambda: {})() or {}
        for name in sorted(stats):
            lines += [f"# TYPE {p}_batching_{name}_total counter", f"{p}_batching_{name}_total {stats[name]}"]
        if getattr(engine, "batching", None) is not None:  # batching on, whether or not a batch ran yet
            queued = engine.batching_queued()
            lines += [f"# HELP {p}_batching_queued_requests Requests waiting in the batch queue now.",
                      f"# TYPE {p}_batching_queued_requests gauge", f"{p}_batching_queued_requests {queued}"]
        ready = bool(engine.is_ready())
        lines += [f"# HELP {p}_ready 1 when every model has an AVAILABLE version.", f"# TYPE {p}_ready gauge",
                  f"{p}_ready {int(ready)}"]
        return "\n".join(lines) + "\n"


class ShutdownRequested(BaseException):
    """Raised by `ShutdownSignals` in the main thread when a signal arrives during startup.

    A BaseException (like KeyboardInterrupt), so that no `except Exception` on the way (a failed
    model load is caught and retried) swallows it.
    """

    def __init__(self, number):
        super().__init__(signal.Signals(number).name)
        self.number = number


class ShutdownSignals:
    """SIGTERM / SIGINT handlers installed once, before anything slow, for the whole life of a server.

    A process that loads models for a minute must not die mid-load on the supervisor's SIGTERM,
    nor miss one that arrives between "ready" and the wait for it. While `interrupting` (startup),
    a signal raises `ShutdownRequested` in the main thread, which abandons loading; afterwards it
    only sets `received`, which `EmbeddedServer.serve_until_signal` waits for. Use as a context
    manager in the main thread; the previous handlers come back on exit.

    Example:
        with ShutdownSignals() as signals:
            try:
                server.start()                  # a SIGTERM here raises ShutdownRequested
            except ShutdownRequested:
                return server.stop(grace_s=0)
            server.serve_until_signal(signals=signals)   # from here on a SIGTERM means: drain
    """

    def __init__(self, signals=(signal.SIGTERM, signal.SIGINT), *, interrupting=True):
        self.signals = tuple(signals)
        self.interrupting = interrupting
        self.received = threading.Event()
        self.number = None
        self.startup_signal = None
        self._previous = {}
        self._previous_unraisablehook = None

    def _handle(self, number, frame):
        if self.number is None:
            self.number = number
        self.received.set()
        if self.interrupting:
            self.interrupting = False  # one raise: a second signal must not hit the cleanup
            # Kept as well as raised: Python runs the handler wherever the main thread is, and a
            # raise inside a finalizer (TensorFlow's Executor.__del__ while a model loads) is
            # swallowed there ("Exception ignored in ..."); the caller checks this after startup.
            self.startup_signal = signal.Signals(number).name
            raise ShutdownRequested(number)

    def _unraisable(self, unraisable):
        """A `ShutdownRequested` swallowed by a finalizer is not news (see `_handle`): no traceback."""
        if isinstance(unraisable.exc_value, ShutdownRequested):
            return
        self._previous_unraisablehook(unraisable)

    def __enter__(self):
        for sig in self.signals:
            self._previous[sig] = signal.signal(sig, self._handle)
        self._previous_unraisablehook = sys.unraisablehook
        sys.unraisablehook = self._unraisable
        return self

    def __exit__(self, *exc):
        self.restore()

    def restore(self):
        """Put the previous handlers back (a second SIGTERM / Ctrl-C while draining then ends the process)."""
        for sig, old in self._previous.items():
            signal.signal(sig, old)
        self._previous = {}
        if self._previous_unraisablehook is not None:
            sys.unraisablehook = self._previous_unraisablehook
            self._previous_unraisablehook = None


def _host_port(host, port):
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _read(path, what):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as error:
        raise FileNotFoundError(f"{what} {path}: {error.strerror or error}") from None


class EmbeddedServer:
    """Serves an `InferenceEngine` over gRPC (TF Serving protos) and REST (TF Serving JSON).

    Args:
        engine: an `InferenceEngine`, not started yet (`start()` starts it) or already started.
        host: interface to bind both ports to; "127.0.0.1" keeps the server on this machine.
        grpc_port: gRPC port, 0 = any free port, None = no gRPC.
        rest_port: REST port, 0 = any free port, None = no REST.
        tls_cert, tls_key: PEM files; with both, gRPC uses TLS and REST is HTTPS.
        max_request_bytes: largest request accepted (gRPC message / HTTP body); default: the
            engine's `limits.max_request_bytes`, else 64 MiB.
        grpc_workers: gRPC handler threads = most requests served at once over gRPC (requests
            waiting in the batching queue hold one each, so keep it above the client concurrency).
        grpc_max_concurrent_rpcs: RPCs accepted at once (running + waiting for a thread); one
            more is answered RESOURCE_EXHAUSTED by gRPC itself.
        rest_workers: REST handler threads (requests, not connections: connections cost no thread).
        rest_max_connections: open REST connections at most (one more is answered 503).
        rest_header_timeout_s, rest_body_timeout_s: deadlines for a REST request's headers
            (TLS handshake included) and for its body.
    """

    def __init__(self, engine, *, host="127.0.0.1", grpc_port=8500, rest_port=8501, tls_cert=None, tls_key=None,
                 max_request_bytes=None, grpc_workers=64, grpc_max_concurrent_rpcs=1024, rest_workers=32,
                 rest_max_connections=1000, rest_header_timeout_s=10.0, rest_body_timeout_s=60.0):
        if (tls_cert is None) != (tls_key is None):
            raise ValueError("TLS needs both a certificate and a key file (--tls-cert and --tls-key)")
        if grpc_port is None and rest_port is None:
            raise ValueError("enable at least one of gRPC and REST")
        self.engine = engine
        self.host = host
        self._requested_ports = (grpc_port, rest_port)
        self.tls_cert, self.tls_key = tls_cert, tls_key
        if max_request_bytes is None:
            limits = getattr(engine, "limits", None)
            max_request_bytes = getattr(limits, "max_request_bytes", None) or DEFAULT_MAX_REQUEST_BYTES
        self.max_request_bytes = int(max_request_bytes)
        self.grpc_workers = grpc_workers
        self.grpc_max_concurrent_rpcs = grpc_max_concurrent_rpcs
        self.rest_options = dict(workers=rest_workers, max_connections=rest_max_connections,
                                 header_timeout_s=rest_header_timeout_s, body_timeout_s=rest_body_timeout_s)
        self.grpc_port = None
        self.rest_port = None
        self._grpc = None
        self._health = None
        self._rest = None
        self._stopped = threading.Event()
        self._stop_lock = threading.Lock()
        self._stop_result = None
        self.metrics = ServerMetrics()

    @property
    def tls(self):
        return self.tls_cert is not None

    @property
    def grpc_address(self):
        """"host:port" for gRPC clients (None without gRPC)."""
        return None if self.grpc_port is None else _host_port(self.host, self.grpc_port)

    @property
    def rest_url(self):
        """"http(s)://host:port" for REST clients (None without REST)."""
        return None if self._rest is None else self._rest.url

    def start(self, *, start_engine=True):
        """Starts the engine (loads models, runs warmup), then binds and opens both ports; returns self."""
        if start_engine:
            self.engine.start()
        grpc_port, rest_port = self._requested_ports
        try:
            if grpc_port is not None:
                self._start_grpc(grpc_port)
            if rest_port is not None:
                self._start_rest(rest_port)
        except BaseException:
            self.stop(grace_s=0)
            raise
        if self._health is not None:
            self._health.set_serving(True)
        logger.info("serving: gRPC %s, REST %s", self.grpc_address, self.rest_url)
        return self

    def _start_grpc(self, port):
        options = [
            ("grpc.max_receive_message_length", self.max_request_bytes),
            ("grpc.max_send_message_length", -1),
            # Without this a second server silently shares a port that is already taken.
            ("grpc.so_reuseport", 0),
        ]
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=self.grpc_workers, thread_name_prefix="grpc"),
                             options=options, maximum_concurrent_rpcs=self.grpc_max_concurrent_rpcs)
        # Imported here: grpc_service imports TensorFlow (its protos), and this module must stay
        # light for `ShutdownSignals`, which `bert-keras serve` installs before anything slow.
        from serving.server.grpc_service import add_services

        self._health = add_services(server, self.engine, self.metrics)
        address = _host_port(self.host, port)
        try:
            if self.tls:
                credentials = grpc.ssl_server_credentials(
                    [(_read(self.tls_key, "--tls-key"), _read(self.tls_cert, "--tls-cert"))])
                bound = server.add_secure_port(address, credentials)
            else:
                bound = server.add_insecure_port(address)
        except RuntimeError as error:
            raise OSError(f"cannot listen for gRPC on {address}: {error} (port in use? pick another with --port)") \
                from None
        if not bound:
            raise OSError(f"cannot listen for gRPC on {address} (port in use? pick another with --port)")
        server.start()
        self._grpc = server
        self.grpc_port = bound

    def _start_rest(self, port):
        context = None
        if self.tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            try:
                context.load_cert_chain(self.tls_cert, self.tls_key)
            except (OSError, ssl.SSLError) as error:
                raise ValueError(f"cannot load --tls-cert {self.tls_cert} / --tls-key {self.tls_key}: {error}") \
                    from None
        try:
            self._rest = RestServer(self.engine, host=self.host, port=port,
                                    max_request_bytes=self.max_request_bytes, ssl_context=context,
                                    metrics=self.metrics, **self.rest_options).start()
        except OSError as error:
            raise OSError(f"cannot listen for REST on {_host_port(self.host, port)}: {error.strerror or error} "
                          "(port in use? pick another with --rest-port)") from None
        self.rest_port = self._rest.port

    def stop(self, grace_s=30.0):
        """Graceful drain: refuse new requests, finish in-flight ones (up to `grace_s`), stop the engine.

        Safe to call more than once and from any thread. Returns True when everything in flight
        finished within the grace period.
        """
        with self._stop_lock:
            if self._stop_result is not None:
                return self._stop_result
            deadline = time.monotonic() + grace_s

            def left():
                return max(0.0, deadline - time.monotonic())

            if self._health is not None:
                self._health.set_serving(False)
            # Queued batches run now, not after their batch timeout; long requests stop at their
            # next part once the grace period is over (engine.stop), so the drain ends on time.
            self.engine.begin_drain()
            # Both transports stop accepting at once; then each waits for its in-flight requests
            # (a request already accepted reaches the engine, which is stopped last).
            grpc_done = self._grpc.stop(grace_s) if self._grpc is not None else None
            drained = True
            if self._rest is not None:
                drained = self._rest.stop(left())
            if grpc_done is not None:
                drained = grpc_done.wait(left() + 1.0) and drained
            try:
                drained = self.engine.stop(drain_timeout_s=left()) is not False and drained
            except Exception:  # noqa: BLE001 - shutting down anyway
                logger.exception("engine.stop failed")
                drained = False
            self._stop_result = drained
            self._stopped.set()
            return drained

    def wait(self, timeout_s=None):
        """Blocks until `stop()` has finished (or `timeout_s` passed); True if stopped."""
        return self._stopped.wait(timeout_s)

    def serve_until_signal(self, *, grace_s=30.0, signals=(signal.SIGTERM, signal.SIGINT), on_signal=None):
        """Blocks until one of `signals` arrives, then drains and stops. Call from the main thread.

        Args:
            grace_s: how long in-flight requests may take to finish after the signal.
            signals: the signals that trigger the drain, or a `ShutdownSignals` installed earlier
                (before startup, so that no signal is missed between "ready" and this wait; a
                signal it already received drains at once).
            on_signal: called with the signal number before draining (e.g. to print a line).

        Returns:
            True when every in-flight request finished in time.
        """
        if isinstance(signals, ShutdownSignals):
            return self._serve_until(signals, grace_s, on_signal)
        with ShutdownSignals(signals, interrupting=False) as installed:
            return self._serve_until(installed, grace_s, on_signal)

    def _serve_until(self, signals, grace_s, on_signal):
        signals.interrupting = False
        # A timed wait, so that the main thread wakes up to run Python signal handlers.
        while not signals.received.wait(0.5) and not self._stopped.is_set():
            pass
        signals.restore()
        if signals.number is not None and on_signal is not None:
            on_signal(signals.number)
        return self.stop(grace_s)

    def __enter__(self):
        return self.start() if self.grpc_port is None and self.rest_port is None else self

    def __exit__(self, *exc):
        self.stop(grace_s=5)


def version_states(engine, name):
    """(status entries, reason) of a served model, for a startup report.

    Versions that failed to load do not stop the server (TF Serving keeps serving the others
    too, and polling may find a good version later): this says what serves and what not.
    `reason` explains an empty or all-failed status ("see the versions above" when there are
    entries to read).
    """
    from serving.server.errors import ServingError

    try:
        return engine.model_status(name), "see the versions above"
    except ServingError as error:
        return [], error.message


@dataclasses.dataclass(frozen=True)
class ServeOutcome:
    """How `serve_until_shutdown` ended: `stopped_while_starting` names the signal that abandoned
    startup (nothing was served), else `drained` says whether in-flight requests all finished."""

    stopped_while_starting: str = None
    drained: bool = True

    def summary(self):
        """The last line of `bert-keras serve`: stopped (drained or not), or stopped while starting."""
        if self.stopped_while_starting:
            return f"{self.stopped_while_starting}: stopped while starting (nothing was served)"
        return "stopped" + ("" if self.drained else " (some requests did not finish in time)")


def serve_until_shutdown(build, *, start=None, on_ready=None, grace_s=30.0, on_signal=None):
    """Builds, starts and serves a server until SIGTERM / SIGINT; a signal at any moment ends it cleanly.

    The signal handlers are installed first, before anything slow: during startup (`build`,
    `start`: models loading) a signal abandons it, after `on_ready` it drains in-flight requests
    for up to `grace_s` seconds.

    Args:
        build: () -> an `EmbeddedServer`, not started (its errors propagate).
        start: (server) -> None, starts it (default `server.start()`).
        on_ready: (server) -> None, called once it serves (e.g. to print its addresses).
        grace_s: the drain's limit.
        on_signal: (signal number) -> None, called before draining.

    Returns:
        `ServeOutcome`.
    """
    with ShutdownSignals() as signals:
        server = None
        try:
            server = build()
            (start or EmbeddedServer.start)(server)
            signals.interrupting = False  # ready from here on: a signal drains
            if signals.startup_signal is not None:  # its raise was swallowed by a finalizer
                raise ShutdownRequested(signal.Signals[signals.startup_signal])
        except ShutdownRequested as stop:
            signals.interrupting = False
            if server is not None:
                server.stop(grace_s=0)
            return ServeOutcome(stopped_while_starting=str(stop))
        try:
            if on_ready is not None:
                on_ready(server)
        except BaseException:
            server.stop(grace_s=0)
            raise
        drained = server.serve_until_signal(grace_s=grace_s, signals=signals, on_signal=on_signal)
    return ServeOutcome(drained=drained)
