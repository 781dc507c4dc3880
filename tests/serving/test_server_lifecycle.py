"""EmbeddedServer lifecycle: graceful drain (in-process and SIGTERM to `bert-keras serve`), TLS, ports, CLI errors.

In-flight requests are made observable without a slow model: server-side batching with a
long batch timeout keeps them waiting in the batch queue while the server is told to stop.
"""

import datetime
import ipaddress
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from engine_fixtures import write_tiny_model

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture(scope="module")
def model_base(tmp_path_factory):
    base = tmp_path_factory.mktemp("lifecycle_models")
    write_tiny_model(str(base / "tiny" / "1"), version=1)
    return str(base / "tiny")


def _engine(model_base, batch_timeout_micros=None):
    from serving.server import BatchingOptions, InferenceEngine, ModelSource

    batching = None if batch_timeout_micros is None else BatchingOptions(
        max_batch_size=64, batch_timeout_micros=batch_timeout_micros)
    return InferenceEngine([ModelSource("tiny", model_base)], batching=batching, poll_interval_s=0)


def _send_in_threads(addresses, count_per_protocol, results):
    """Starts threads that each send one predict; results[i] = ("ok", length) or ("error", code).

    Clients connect and read the metadata first, so that the threads only have the predict
    request left to send.
    """
    from serving.client import ServingClient, ServingClientError

    clients = []
    for protocol, address in addresses:
        for _ in range(count_per_protocol):
            client = ServingClient(address, "tiny", protocol=protocol, timeout=300)  # answered at the drain
            client.metadata()
            clients.append(client)

    def one(index, client):
        try:
            results[index] = ("ok", int(client.predict({"text": ["x" * (index + 1)]})["length"][0]))
        except ServingClientError as error:
            results[index] = ("error", error.code)
        finally:
            client.close()

    threads = [threading.Thread(target=one, args=(i, client)) for i, client in enumerate(clients)]
    for thread in threads:
        thread.start()
    return threads


def test_stop_drains_in_flight_requests_then_refuses(model_base):
    import http.client

    from serving.client import ServingClient, ServingClientError
    from serving.server.server import EmbeddedServer

    # A batch timeout of a minute: the six wait in the queue until stop() runs their batch (a 1.5 s
    # timeout could run it before the six were all queued, on a loaded machine).
    engine = _engine(model_base, batch_timeout_micros=60_000_000)
    server = EmbeddedServer(engine, grpc_port=0, rest_port=0).start()
    results = {}
    threads = _send_in_threads([("grpc", server.grpc_address), ("rest", f"127.0.0.1:{server.rest_port}")], 3, results)
    deadline = time.monotonic() + 300  # a safety net: the six are queued within milliseconds
    while engine._scheduler.pending() < 6 and not results and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engine._scheduler.pending() == 6  # the requests now wait in the batch queue
    assert not any(results.values())
    assert _queued(server.rest_url) == 6  # what the SIGTERM test below waits on, from outside
    # A grace period of an hour: stop() returns once the six are answered (it runs their batch at
    # once), not when the grace runs out; the join's limit is only a safety net.
    stopped = {}
    stopper = threading.Thread(target=lambda: stopped.setdefault("drained", server.stop(grace_s=3600)), daemon=True)
    stopper.start()
    stopper.join(300)
    assert not stopper.is_alive(), "stop() sat out its grace period after the requests were answered"
    assert stopped == {"drained": True}  # every in-flight request finished within the grace period
    for thread in threads:
        thread.join(60)
    assert results == {i: ("ok", i + 1) for i in range(6)}  # every in-flight request was answered
    stats = engine.batching_stats()
    assert stats["tasks"] == 6 and stats["rows"] == 6, stats  # all six ran, none was dropped

    # Stopped: both ports refuse.
    with ServingClient(server.grpc_address, "tiny", timeout=2) as client:
        with pytest.raises(ServingClientError) as raised:
            client.status()
        assert raised.value.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED")
    conn = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=2)
    with pytest.raises(OSError):
        conn.request("GET", "/healthz")
        conn.getresponse()
    assert server.stop() is True  # idempotent


def test_sigterm_to_bert_keras_serve_finishes_in_flight_requests_and_exits_0(model_base):
    command = [sys.executable, "-m", "bert_keras.cli.main", "serve", "--model-base-path", model_base,
               "--port", "0", "--rest-port", "0", "--file-system-poll-wait-seconds", "0",
               "--enable-batching", "--max-batch-size", "64", "--batch-timeout-micros", "60000000"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1")
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    output = []
    try:
        deadline = time.monotonic() + 300  # TensorFlow's import and the load, on a loaded machine
        ready = None
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            output.append(line)
            ready = re.search(r"ready: gRPC (\S+)\s+REST (\S+)", line)
            if ready:
                break
        assert ready, "".join(output)
        grpc_address, rest_url = ready.group(1), ready.group(2)
        results = {}
        threads = _send_in_threads([("grpc", grpc_address), ("rest", rest_url)], 3, results)
        # In the batch queue until SIGTERM's drain runs it (a minute's timeout). The server's own
        # gauge says when all six are there (a fixed 2 s sleep could signal before a slow thread's
        # request arrived, which was then refused); the deadline is only a safety net.
        deadline = time.monotonic() + 300
        while _queued(rest_url) < 6 and not any(results.values()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _queued(rest_url) == 6, "".join(output)
        assert not any(results.values())
        process.send_signal(signal.SIGTERM)
        for thread in threads:
            thread.join(300)
        # Read to EOF through the same buffered pipe (communicate() would bypass its buffer);
        # a timer kills a server that never exits (a safety net: it exits within seconds).
        killer = threading.Timer(300, process.kill)
        killer.start()
        output.append(process.stdout.read())
        process.wait()
        killer.cancel()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    log = "".join(output)
    assert process.returncode == 0, log
    assert results == {i: ("ok", i + 1) for i in range(6)}, log
    assert "SIGTERM: draining" in log and "bert-keras serve: stopped" in log and "did not finish" not in log
    assert "bert-keras query --address" in log  # the example commands printed at start


def _queued(rest_url):
    """The server's batching_queued_requests gauge (Prometheus metrics on its REST port)."""
    import urllib.request

    url = rest_url if "://" in rest_url else "http://" + rest_url
    with urllib.request.urlopen(url.rstrip("/") + "/monitoring/prometheus/metrics", timeout=60) as response:
        text = response.read().decode()
    return int(re.search(r"^bert_keras_serving_batching_queued_requests (\d+)$", text, re.M).group(1))


def _serve(model_base, *extra):
    """`bert-keras serve` of `model_base` in a subprocess (free ports, no polling), stdout+stderr piped."""
    command = [sys.executable, "-m", "bert_keras.cli.main", "serve", "--model-base-path", model_base,
               "--port", "0", "--rest-port", "0", "--file-system-poll-wait-seconds", "0", *extra]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1")
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _read_until(process, pattern, output, timeout=300):
    """Reads lines into `output` until one matches `pattern`; the match (None at EOF or timeout)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            return None
        output.append(line)
        match = re.search(pattern, line)
        if match:
            return match
    return None


def _finish(process, output, timeout=300):
    """Reads to EOF (a timer kills a process that never exits); the whole log."""
    killer = threading.Timer(timeout, process.kill)
    killer.start()
    try:
        output.append(process.stdout.read())
        process.wait()
    finally:
        killer.cancel()
        if process.poll() is None:
            process.kill()
            process.wait()
    return "".join(output)


@pytest.fixture(scope="module")
def slow_loading_base(tmp_path_factory, model_base):
    """The tiny model with 1,000 warmup requests (TF Serving's most) of 32 rows each: loading
    takes seconds, however fast the machine (one row each once loaded in under 0.3 s)."""
    from engine_fixtures import write_warmup

    base = tmp_path_factory.mktemp("slow_loading") / "tiny"
    shutil.copytree(os.path.join(model_base, "1"), str(base / "1"))
    shutil.rmtree(str(base / "1" / "assets.extra"), ignore_errors=True)
    write_warmup(str(base / "1"), [["warm " * 20] * 32] * 1000)
    return str(base)


def test_sigterm_during_model_loading_exits_0_without_a_traceback(slow_loading_base):
    """The handler is installed before the models load: SIGTERM mid-load used to kill the process (-15)."""
    process = _serve(slow_loading_base)
    output = []
    try:
        assert _read_until(process, r"bert-keras serve: loading", output), "".join(output)
        time.sleep(0.3)  # TensorFlow is loading the version / replaying its warmup requests
        process.send_signal(signal.SIGTERM)
    finally:
        log = _finish(process, output)
    assert process.returncode == 0, log
    assert "SIGTERM: stopped while starting" in log and "ready:" not in log, log
    assert "Traceback" not in log, log


def test_sigterm_right_after_the_ready_line_drains_and_exits_0(model_base):
    """The ready line used to come before the drain handler: a SIGTERM at once killed the process."""
    process = _serve(model_base)
    output = []
    try:
        assert _read_until(process, r"ready: gRPC", output), "".join(output)
        process.send_signal(signal.SIGTERM)
    finally:
        log = _finish(process, output)
    assert process.returncode == 0, log
    assert "SIGTERM: draining" in log and "bert-keras serve: stopped" in log and "Traceback" not in log, log


def _self_signed_certificate(directory):
    """(cert.pem, key.pem) for localhost / 127.0.0.1, made with `cryptography`, else the openssl binary."""
    cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        if not shutil.which("openssl"):
            pytest.skip("neither the cryptography package nor the openssl binary is available to make a certificate")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True, capture_output=True)
        return cert, key
    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                    x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                       critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(private, hashes.SHA256())
    )
    with open(cert, "wb") as f:
        f.write(certificate.public_bytes(serialization.Encoding.PEM))
    with open(key, "wb") as f:
        f.write(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
    return cert, key


def test_tls_round_trip_grpc_and_https(model_base, tmp_path):
    from serving.client import ServingClient, ServingClientError
    from serving.server.server import EmbeddedServer

    cert, key = _self_signed_certificate(str(tmp_path))
    server = EmbeddedServer(_engine(model_base), grpc_port=0, rest_port=0, tls_cert=cert, tls_key=key).start()
    try:
        assert server.rest_url.startswith("https://")
        for protocol, address in (("grpc", server.grpc_address), ("rest", f"127.0.0.1:{server.rest_port}")):
            with ServingClient(address, "tiny", protocol=protocol, root_certificates=cert, timeout=10) as client:
                out = client.predict(["secure", "hi"])
                assert out["length"].tolist() == [6, 2] and out["label"].dtype == object
        # Without TLS (or without trusting the certificate) nothing gets through.
        with ServingClient(server.grpc_address, "tiny", timeout=3) as plain:
            with pytest.raises(ServingClientError) as raised:
                plain.status()
            assert raised.value.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED")
        with ServingClient(f"127.0.0.1:{server.rest_port}", "tiny", protocol="rest", timeout=3) as plain:
            with pytest.raises(ServingClientError):
                plain.status()
        with ServingClient(f"https://127.0.0.1:{server.rest_port}", "tiny", protocol="rest", timeout=3) as untrusted:
            with pytest.raises(ServingClientError) as raised:
                untrusted.status()
            assert "CERTIFICATE_VERIFY_FAILED" in raised.value.message
        with ServingClient(f"127.0.0.1:{server.rest_port}", "tiny", protocol="rest", root_certificates=cert) as ok:
            assert ok.status()[0]["state"] == "AVAILABLE"  # the server survived the failed handshakes
    finally:
        server.stop(grace_s=2)


def test_port_in_use_and_bad_tls_files_are_clear_errors(model_base, tmp_path):
    import socket

    from serving.server.server import EmbeddedServer

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        engine = _engine(model_base)
        with pytest.raises(OSError, match=f"REST on 127.0.0.1:{port}.*--rest-port"):
            EmbeddedServer(engine, grpc_port=0, rest_port=port).start()
        assert not engine.is_ready()  # the failed start stopped the engine again
        with pytest.raises(OSError, match=f"gRPC on 127.0.0.1:{port}"):
            EmbeddedServer(_engine(model_base), grpc_port=port, rest_port=None).start()
    with pytest.raises(ValueError, match="both a certificate and a key"):
        EmbeddedServer(_engine(model_base), tls_cert=str(tmp_path / "c.pem"))


def test_serve_cli_argument_errors(tmp_path, capsys):
    from bert_keras.cli.main import main

    assert main(["serve", "--model-base-path", str(tmp_path / "missing")]) == 2
    assert "missing: no such directory" in capsys.readouterr().err
    assert main(["serve"]) == 2
    assert "--model-base-path DIR or --model-config-file FILE" in capsys.readouterr().err
    assert main(["serve", "--model-base-path", str(tmp_path), "--tls-cert", "c.pem"]) == 2
    assert "both --tls-cert and --tls-key" in capsys.readouterr().err
    # gRPC served --port 70000 on port 4464 (70000 - 65536) without a word.
    for flag in ("--port", "--rest-port"):
        assert main(["serve", "--model-base-path", str(tmp_path), flag, "70000"]) == 2
        assert f"{flag} 70000: a TCP port is at most 65535" in capsys.readouterr().err


def test_batching_parameters_file_format(tmp_path, capsys):
    from serving.server.model_config import ModelConfigError, parse_batching_parameters

    text = ("# TF Serving batching parameters\nmax_batch_size { value: 48 }\nbatch_timeout_micros { value: 500 }\n"
            "num_batch_threads { value: 4 }\nmax_enqueued_batches: 20\npad_variable_length_inputs: false\n"
            "allowed_batch_sizes: 8\nallowed_batch_sizes: 48\n")
    assert parse_batching_parameters(text) == {
        "max_batch_size": 48, "batch_timeout_micros": 500, "num_batch_threads": 4, "max_enqueued_batches": 20,
        "allowed_batch_sizes": (8, 48), "ignored": []}
    # pad_variable_length_inputs: true was noted as "not used" and served: TF Serving pads merged token IDs
    # with each tensor's first element ([CLS], mask 1) and answers at the padded length; here they were not.
    with pytest.raises(ModelConfigError, match=r"batching_parameters.txt:2: pad_variable_length_inputs: true is "
                                               r"not supported by the embedded server: .*first element"):
        parse_batching_parameters("max_batch_size: 8\npad_variable_length_inputs: true")
    with pytest.raises(ModelConfigError, match=r":1: pad_variable_length_inputs: true or false expected, got '2'"):
        parse_batching_parameters("pad_variable_length_inputs: 2")
    assert parse_batching_parameters("pad_variable_length_inputs: 0") == {"ignored": []}
    with pytest.raises(ModelConfigError, match=r"batching_parameters.txt:2: max_batch_size must be an integer"):
        parse_batching_parameters("\nmax_batch_size { value: lots }")
    with pytest.raises(ModelConfigError, match=r":1: expected ':' or '\{'"):
        parse_batching_parameters("max_batch_size 32")

    # The kit's own file (deploy-kit) is read by `bert-keras serve` with the same parser.
    from bert_keras.cli.main import main
    from serving.deploy.batching_config import format_batching_parameters

    path = tmp_path / "batching_parameters.txt"
    path.write_text(format_batching_parameters(gpu=False))
    parsed = parse_batching_parameters(path.read_text())
    assert parsed["max_batch_size"] >= 1 and parsed["batch_timeout_micros"] >= 0
    bad = tmp_path / "bad.txt"
    bad.write_text("max_batch_size { value: 32 }\nnum_batch_threads: many\n")
    assert main(["serve", "--model-base-path", str(tmp_path), "--enable-batching",
                 "--batching-parameters-file", str(bad)]) == 2
    assert "bad.txt:2: num_batch_threads must be an integer" in capsys.readouterr().err
    # allowed_batch_sizes was skipped ("not used"): a list not ending at max_batch_size served, where
    # tensorflow_model_server refuses it at load.
    bad.write_text("max_batch_size { value: 32 }\nallowed_batch_sizes: 8\nallowed_batch_sizes: 16\n")
    assert main(["serve", "--model-base-path", str(tmp_path), "--enable-batching",
                 "--batching-parameters-file", str(bad)]) == 2
    assert (f"--batching-parameters-file {bad}: Last entry in allowed_batch_sizes must match max_batch_size; "
            "last entry was 16; expected 32") in capsys.readouterr().err
    # A file listing allowed_batch_sizes without max_batch_size was checked against --max-batch-size
    # (default 32) while the error's "expected 32" named no source: it now says where 32 came from.
    bad.write_text("allowed_batch_sizes: 8\nallowed_batch_sizes: 16\n")
    assert main(["serve", "--model-base-path", str(tmp_path), "--enable-batching",
                 "--batching-parameters-file", str(bad)]) == 2
    assert (f"--batching-parameters-file {bad}: Last entry in allowed_batch_sizes must match max_batch_size; "
            "last entry was 16; expected 32 (the file sets no max_batch_size, so the --max-batch-size default 32 "
            "applies: set max_batch_size { value: N } in the file or pass --max-batch-size N)"
            ) in capsys.readouterr().err
    assert main(["serve", "--model-base-path", str(tmp_path), "--enable-batching", "--max-batch-size", "24",
                 "--batching-parameters-file", str(bad)]) == 2
    assert "expected 24 (the file sets no max_batch_size, so --max-batch-size 24 applies" in capsys.readouterr().err


def test_health_reports_draining(model_base):
    from serving.server.rest_service import RestService

    engine = _engine(model_base)
    engine.start()
    try:
        service = RestService(engine)
        assert service.handle("GET", "/v1/health", b"") == (200, {"status": "ready"})
        service.draining = True
        status, body = service.handle("GET", "/readyz", b"")
        assert status == 503 and body["status"] == "draining"
        assert service.handle("GET", "/healthz", b"") == (200, {"status": "draining"})
    finally:
        engine.stop(drain_timeout_s=2)
    np.testing.assert_equal(engine.is_ready(), False)


class _SignalsInFinalizer:
    """Sends SIGTERM from inside `__del__`: Python runs the handler there, and swallows its raise."""

    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10_000):  # bytecode boundaries, so the handler runs inside this finalizer
            pass


class _NeverServed:
    def __init__(self):
        self.stopped = False

    def stop(self, grace_s):
        self.stopped = True


def test_a_startup_signal_swallowed_by_a_finalizer_still_stops_startup(capsys):
    """CI caught this: SIGTERM landed in TensorFlow's Executor.__del__ while a model loaded; the raise
    was swallowed there, and the server went on to print "ready" and drain instead of stopping."""
    from serving.server.server import serve_until_shutdown

    server = _NeverServed()
    ready = []
    hook, handler = sys.unraisablehook, signal.getsignal(signal.SIGTERM)

    def start(server):
        _SignalsInFinalizer()  # dropped at once: the finalizer runs here

    outcome = serve_until_shutdown(lambda: server, start=start, on_ready=ready.append)
    assert outcome.stopped_while_starting == "SIGTERM" and not ready and server.stopped
    assert "Traceback" not in capsys.readouterr().err  # the swallowed raise prints nothing
    assert sys.unraisablehook is hook and signal.getsignal(signal.SIGTERM) is handler  # both put back
