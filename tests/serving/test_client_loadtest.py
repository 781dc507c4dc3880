"""`serving.client.ServingClient`, `serving.loadtest` and the `query` / `loadtest` CLIs against the embedded server.

The tiny SavedModel of engine_fixtures (outputs computable with numpy) is served with
server-side batching on, so concurrent requests from the load test really are merged.
"""

import json
import os

import numpy as np
import pytest

from engine_fixtures import expected_probabilities, write_tiny_model


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from serving.server import BatchingOptions, InferenceEngine, ModelSource
    from serving.server.server import EmbeddedServer

    base = tmp_path_factory.mktemp("client_models")
    write_tiny_model(str(base / "tiny" / "1"), version=1)
    engine = InferenceEngine([ModelSource("tiny", str(base / "tiny"), labels={"stable": 1})],
                             batching=BatchingOptions(max_batch_size=16, batch_timeout_micros=3000),
                             poll_interval_s=0)
    server = EmbeddedServer(engine, grpc_port=0, rest_port=0).start()
    yield server
    server.stop(grace_s=5)


@pytest.fixture(params=["grpc", "rest"])
def client(request, server):
    from serving.client import ServingClient

    address = server.grpc_address if request.param == "grpc" else f"127.0.0.1:{server.rest_port}"
    with ServingClient(address, "tiny", protocol=request.param, timeout=300) as client:
        yield client


def test_client_predict_metadata_status(client):
    texts = ["hello", "a rather longer text"]
    out = client.predict(texts)  # the signature's single text input, found from the metadata
    assert out["label"].tolist() == [b"pos", b"neg"]
    assert out["length"].dtype == np.int64 and out["length"].tolist() == [5, 20]
    assert out["probabilities"].dtype == np.float32
    np.testing.assert_allclose(out["probabilities"], expected_probabilities(texts, 1), rtol=1e-5)

    scaled = client.predict({"x": [[1, 2, 3]]}, signature_name="scale")  # ints cast to the input's float32
    np.testing.assert_allclose(scaled["y"], [[3.0, 5.0, 7.0]])
    assert client.predict({"text": ["a", "b"], "text_b": ["c", "d"]}, signature_name="pair")["joined"].tolist() \
        == [b"a|c", b"b|d"]

    signatures = client.metadata()
    assert signatures["serving_default"]["inputs"]["text"] == {"dtype": "DT_STRING", "shape": [-1]}
    assert signatures["scale"]["inputs"]["x"] == {"dtype": "DT_FLOAT", "shape": [-1, 3]}
    assert signatures["classification"]["method_name"] == "tensorflow/serving/classify"
    assert client.status() == [{"version": 1, "state": "AVAILABLE", "error_code": "OK", "error_message": ""}]


def test_client_classify_regress_and_versions(client, server):
    from serving.client import ServingClient

    result = client.classify([{"text": "hello"}, {"text": "hi"}], signature_name="classification")
    assert [[label for label, _ in row] for row in result] == [["neg", "pos"]] * 2
    np.testing.assert_allclose([[score for _, score in row] for row in result],
                               expected_probabilities(["hello", "hi"], 1), rtol=1e-5)
    np.testing.assert_allclose(client.regress([{"text": "abc"}], signature_name="regression"), [4.0])
    # No name: the server (TF Serving as the embedded one) would run the predict serving_default and refuse;
    # the client names the model's one classify / regress signature itself.
    assert client.classify([{"text": "hello"}, {"text": "hi"}]) == result
    np.testing.assert_allclose(client.regress([{"text": "abc"}]), [4.0])

    address = server.grpc_address if client.protocol == "grpc" else f"127.0.0.1:{server.rest_port}"
    with ServingClient(address, "tiny", protocol=client.protocol, version_label="stable") as labelled:
        assert labelled.predict("hello")["version"].tolist() == [1]
    with ServingClient(address, "tiny", protocol=client.protocol, version=3) as missing:
        from serving.client import ServingClientError

        with pytest.raises(ServingClientError) as raised:
            missing.status()
        assert raised.value.code == "NOT_FOUND" and "version 3" in raised.value.message


def test_client_errors_carry_the_status_code(client):
    from serving.client import ServingClientError

    with pytest.raises(ServingClientError) as raised:
        client.predict([b"ok", b"\xff"])
    assert raised.value.code == "INVALID_ARGUMENT" and "UTF-8" in raised.value.message
    if client.protocol == "rest":
        assert raised.value.http_status == 400
    with pytest.raises(ServingClientError) as raised:
        client.predict(["a"], signature_name="nosig")
    assert raised.value.code == "INVALID_ARGUMENT" and "nosig" in raised.value.message  # found in the metadata
    assert client.predict("fine again")["length"].tolist() == [10]


def test_client_unreachable_server_is_unavailable():
    import socket

    from serving.client import ServingClient, ServingClientError

    # A port nobody listens on: held bound (not listening, so connections are refused) for the whole
    # test; released at once, another process's port-0 server could be given it meanwhile.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        for protocol in ("grpc", "rest"):
            with ServingClient(f"127.0.0.1:{port}", "tiny", protocol=protocol, timeout=2) as client:
                with pytest.raises(ServingClientError) as raised:
                    client.status()
                assert raised.value.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED"), raised.value


def test_the_wrong_port_for_the_protocol_is_named_not_printed_as_bytes(server):
    """`query --rest` at the gRPC port printed "connection lost:" and the HTTP/2 frames' bytes,
    then "REST needs --rest" although --rest was given."""
    from serving.client import ServerConnectionError, connect

    with pytest.raises(ServerConnectionError) as raised:
        connect(server.grpc_address, "tiny", rest=True, timeout=10)
    message = str(raised.value)
    assert "does not answer in HTTP/1.1" in message and "a gRPC port?" in message, message
    assert "a gRPC port takes no --rest" in message and "\\x00" not in message and "\x00" not in message
    with pytest.raises(ServerConnectionError, match="a REST port needs --rest"):
        connect(f"127.0.0.1:{server.rest_port}", "tiny", timeout=10)


def test_an_unknown_model_name_says_where_the_served_names_are(server):
    """`query --model-name tinyy` answered only "model 'tinyy' not found": neither server lists its models
    to a client, so the error now says which flag names the model and where the served names are printed.
    A missing version of a served model keeps its own answer."""
    from serving.client import ServerConnectionError, _unknown_model, connect

    for address, rest in ((server.grpc_address, False), (f"127.0.0.1:{server.rest_port}", True)):
        with pytest.raises(ServerConnectionError) as raised:
            connect(address, "tinyy", rest=rest, timeout=10)
        message = str(raised.value)
        assert "NOT_FOUND: model 'tinyy' not found (no model named 'tinyy' is served there: --model-name" in message
        assert "`bert-keras serve` prints after 'models:'" in message
        with pytest.raises(ServerConnectionError) as raised:
            connect(address, "tiny", rest=rest, version=7, timeout=10)
        assert "version 7 of model 'tiny' not found" in str(raised.value)
        assert "no model named" not in str(raised.value)
    # tensorflow_model_server's words for an unknown model (gRPC, REST status), and not for a version
    assert _unknown_model("Servable not found for request: Latest(bert)", "bert")
    assert _unknown_model("Could not find any versions of model bert", "bert")
    assert not _unknown_model("Servable not found for request: Specific(bert, 3)", "bert")


@pytest.mark.parametrize("protocol", ["grpc", "rest"])
def test_an_address_without_a_usable_port_or_a_timeout_of_zero_is_refused_by_name(protocol, capsys):
    """gRPC dialled "127.0.0.1" at port 443 and "127.0.0.1:99999" at 34463 (modulo 65536), REST said
    "connection refused" for 99999; `--timeout 0` was "Deadline Exceeded" (gRPC) or "cannot reach
    ...: Operation now in progress" with "is `bert-keras serve` running?" (REST: a non-blocking socket)."""
    from bert_keras.cli.main import main
    from serving.client import ServingClient

    default = 8501 if protocol == "rest" else 8500
    with pytest.raises(ValueError, match=f"'127.0.0.1' has no port: give host:port, e.g. 127.0.0.1:{default}"):
        ServingClient("127.0.0.1", "tiny", protocol=protocol)
    with pytest.raises(ValueError, match="port 99999 is not a TCP port"):
        ServingClient("127.0.0.1:99999", "tiny", protocol=protocol)
    for timeout in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="timeout must be a number of seconds above 0"):
            ServingClient("127.0.0.1:8500", "tiny", protocol=protocol, timeout=timeout)
    with ServingClient("[::1]:8500", "tiny", protocol=protocol, timeout=None) as client:
        assert client.timeout is None
    if protocol == "grpc":  # gRPC's own target syntax stays gRPC's to resolve
        ServingClient("unix:/tmp/no-such.sock", "tiny").close()
    rest = ["--rest"] if protocol == "rest" else []
    assert main(["query", "--address", "127.0.0.1:99999", *rest, "--model", "tiny", "hi"]) == 2
    assert "server address '127.0.0.1:99999': port 99999 is not a TCP port (1-65535)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["loadtest", "--address", "127.0.0.1:8500", *rest, "--model", "tiny", "--timeout", "0"])
    assert "argument --timeout: must be a finite number above 0, got 0" in capsys.readouterr().err


def test_a_negative_version_over_rest_is_refused_before_asking_and_asked_for_over_grpc(server, capsys):
    """TF Serving's REST paths read `/versions/(\\d+)`: `query --rest --version -1` printed the server's
    "INVALID_ARGUMENT: Malformed request: GET /v1/models/tiny/versions/-1/metadata". The client says why,
    in the command's flags; over gRPC the version is asked for (NOT_FOUND here, as TF Serving's)."""
    from bert_keras.cli.main import main
    from serving.client import ServingClient

    with pytest.raises(ValueError, match=r"version=-1: TF Serving's REST API takes versions of digits only"):
        ServingClient(f"127.0.0.1:{server.rest_port}", "tiny", protocol="rest", version=-1)
    assert main(["query", "--address", f"127.0.0.1:{server.rest_port}", "--rest", "--model", "tiny",
                 "--version", "-1", "hi"]) == 2
    error = capsys.readouterr().err
    assert "error: --version -1: TF Serving's REST API takes versions of digits only" in error, error
    assert "Malformed" not in error  # the server was not asked
    assert main(["query", "--address", server.grpc_address, "--model", "tiny", "--version", "-1", "hi"]) == 2
    assert "NOT_FOUND: version -1 of model 'tiny' not found" in capsys.readouterr().err


@pytest.mark.parametrize("protocol", ["grpc", "rest"])
def test_a_tls_ca_that_is_missing_or_no_certificate_is_named(protocol, tmp_path, capsys):
    """`query --tls-ca FILE` of a file that is no PEM certificate: gRPC logged "Could not load any
    root certificate" and answered "UNAVAILABLE ... is `bert-keras serve` running?", REST "no start
    line: cadata does not contain a certificate"; a missing file was "[Errno 2] No such file or
    directory" without the flag."""
    from bert_keras.cli.main import main
    from serving.client import CertificateError, ServingClient

    not_pem = tmp_path / "server.key"
    not_pem.write_text("just text\n")
    with pytest.raises(CertificateError, match=f"{not_pem} holds no PEM certificate"):
        ServingClient("127.0.0.1:8500", "tiny", protocol=protocol, root_certificates=str(not_pem))
    rest = ["--rest"] if protocol == "rest" else []
    assert main(["query", "--address", "127.0.0.1:8500", *rest, "--model", "tiny", "--tls-ca", str(not_pem), "hi"]) == 2
    assert f"error: --tls-ca {not_pem} holds no PEM certificate" in capsys.readouterr().err
    missing = tmp_path / "absent.pem"
    assert main(["query", "--address", "127.0.0.1:8500", *rest, "--model", "tiny", "--tls-ca", str(missing), "hi"]) == 2
    assert f"error: --tls-ca {missing}: No such file or directory" in capsys.readouterr().err


@pytest.mark.parametrize("protocol", ["grpc", "rest"])
def test_load_test_counts_qps_and_percentiles(server, protocol):
    from serving.client import ServingClient
    from serving.loadtest import load_test

    address = server.grpc_address if protocol == "grpc" else f"127.0.0.1:{server.rest_port}"
    before = server.engine.batching_stats()
    with ServingClient(address, "tiny", protocol=protocol) as client:
        result = load_test(client, [{"text": ["hello", "world"]}, ["one more"]], concurrency=8, requests=60, warmup=4)
        assert (result.requests, result.ok, result.errors) == (60, 60, {})
        assert result.qps > 0 and result.rows_per_request == 2 and len(result.latencies_ms) == 60
        assert 0 < result.percentile(50) <= result.percentile(95) <= result.percentile(99) <= max(result.latencies_ms)
        report = result.to_json()
        assert report["first_error"] is None  # not "" (no error is null in JSON, as missing latencies are)
        assert report["requests"] == 60 and report["latency_ms"]["p99"] == pytest.approx(result.percentile(99),
                                                                                           abs=1e-3)
        assert "p50" in result.summary() and "60 ok" in result.summary()

        # Failures are counted by status code, in duration mode too.
        bad = load_test(client, [["ok", "FAIL"]], concurrency=2, duration_s=0.3)  # the tiny model refuses "FAIL"
        assert bad.ok == 0 and bad.requests == bad.errors["INVALID_ARGUMENT"] >= 1
        assert "asked to fail" in bad.first_error and "asked to fail" in bad.to_json()["first_error"]
    after = server.engine.batching_stats()
    assert after["merged_batches"] > before.get("merged_batches", 0)  # concurrent requests shared model calls


def test_run_load_validates_its_bounds():
    from serving.loadtest import run_load

    with pytest.raises(ValueError, match="exactly one"):
        run_load(lambda i: None, requests=5, duration_s=1)
    with pytest.raises(ValueError, match="concurrency"):
        run_load(lambda i: None, concurrency=0, requests=5)
    seen = []
    result = run_load(seen.append, concurrency=3, requests=10)
    assert sorted(seen) == list(range(10)) and result.ok == 10


def test_run_load_async_counts_requests_and_errors_by_code():
    import contextlib

    from serving.client import ServingClientError
    from serving.loadtest import run_load_async

    opened, closed, seen = [], [], []

    @contextlib.asynccontextmanager
    async def open_sender():
        opened.append(1)

        async def send(index):
            seen.append(index)
            if index % 5 == 4:
                raise ServingClientError("INVALID_ARGUMENT", f"request {index} is bad")

        yield send
        closed.append(1)

    result = run_load_async(open_sender, lambda send, index: send(index), concurrency=4, requests=20, warmup=3)
    assert (result.requests, result.ok, result.errors) == (20, 16, {"INVALID_ARGUMENT": 4})
    assert result.first_error.startswith("INVALID_ARGUMENT: request") and len(result.latencies_ms) == 16
    assert sorted(seen[3:]) == list(range(20)) and opened == closed == [1]  # 3 warmup calls, then 0..19
    with pytest.raises(ValueError, match="exactly one"):
        run_load_async(open_sender, lambda send, index: send(index), requests=5, duration_s=1)


def test_load_test_inside_a_running_event_loop_falls_back_to_threads(server):
    import asyncio

    from serving.client import ServingClient
    from serving.loadtest import load_test

    async def from_a_notebook_cell():
        with ServingClient(server.grpc_address, "tiny") as client:
            return load_test(client, [["hello"]], concurrency=2, requests=6)

    result = asyncio.run(from_a_notebook_cell())
    assert (result.requests, result.ok) == (6, 6)


def test_query_cli_prints_the_answer(server, capsys):
    from bert_keras.cli.main import main

    assert main(["query", "--address", server.grpc_address, "--model", "tiny", "hello", "a rather longer text"]) == 0
    out = capsys.readouterr().out
    p = expected_probabilities(["hello"], 1)[0]
    assert "'hello'" in out and f"label: pos  (p={p[1]:.3f})" in out
    # The columns are named by the export's Classify signature (its `classes`), as `predict` names
    # them: they were printed as "[0] 0.269  [1] 0.731", leaving the reader to guess the order.
    assert f"probabilities: neg={p[0]:.3f}  pos={p[1]:.3f}\n" in out and "label: neg" in out

    assert main(["query", "--address", f"127.0.0.1:{server.rest_port}", "--rest", "--model", "tiny", "--json",
                 "hello"]) == 0
    (line,) = capsys.readouterr().out.strip().splitlines()
    answer = json.loads(line)
    assert answer["input"] == {"text": "hello"} and answer["outputs"]["label"] == "pos"
    # Named by class as predict --json writes them ({"neg": ..., "pos": ...}); --json printed a bare list.
    assert list(answer["outputs"]["probabilities"]) == ["neg", "pos"]
    np.testing.assert_allclose(list(answer["outputs"]["probabilities"].values()), p, rtol=1e-5)
    assert list(answer["outputs"]) == sorted(answer["outputs"])  # outputs in name order, whatever the protocol

    # Errors are one readable line, exit status 2.
    assert main(["query", "--address", server.grpc_address, "--model", "nope", "hello"]) == 2
    assert "NOT_FOUND" in capsys.readouterr().err
    assert main(["query", "--address", server.grpc_address, "--model", "tiny", "--signature", "pair", "x"]) == 2
    assert "sentence pairs" in capsys.readouterr().err


def test_query_formats_every_export_kind():
    from serving.text_requests import answer_lines as format_row

    ner = {"entity_text": np.array([[b"Ann", b"Paris"]], dtype=object),
           "entity_label": np.array([[b"PER", b"LOC"]], dtype=object),
           "start_char": np.array([[0, 13]]), "end_char": np.array([[3, 18]]),
           "score": np.array([[0.9, 0.8]], dtype=np.float32), "num_entities": np.array([2])}
    lines = format_row(ner, 0)
    assert "PER" in lines[0] and "'Ann'" in lines[0] and "[0:3]" in lines[0] and "[13:18]" in lines[1]
    squad = {"answer": np.array([b"Ann"], dtype=object), "start_char": np.array([17]), "end_char": np.array([20]),
             "score": np.array([2.5], dtype=np.float32), "has_answer": np.array([True])}
    assert format_row(squad, 0) == ["  answer: 'Ann'  [17:20]  score 2.500"]
    squad["has_answer"] = np.array([False])
    assert "no answer" in format_row(squad, 0)[0]
    embedding = {"embedding": np.array([[0.6, 0.8]], dtype=np.float32)}
    assert "2 dims, L2 norm 1.0000" in format_row(embedding, 0)[0]
    choice = {"choice": np.array([1]), "probabilities": np.array([[0.25, 0.75]], dtype=np.float32)}
    assert format_row(choice, 0)[0] == "  choice: ending 1  (p=0.750)"
    classes = {"label": np.array([b"pos"], dtype=object), "class_id": np.array([1]),
               "probabilities": np.array([[0.25, 0.75]], dtype=np.float32)}
    assert format_row(classes, 0, class_names=["neg", "pos"])[1] == "  probabilities: neg=0.250  pos=0.750"
    assert format_row(classes, 0)[1] == "  probabilities: [0] 0.250  [1] 0.750"  # no names known: numbered
    assert format_row({"score": np.array([3.25], dtype=np.float32)}, 0) == ["  score: 3.2500"]
    label = {"label": np.array([b"pos", b"neg"], dtype=object), "truncated": np.array([False, True]),
             "probabilities": np.array([[0.1, 0.9], [0.8, 0.2]], dtype=np.float32)}
    assert len(format_row(label, 0)) == 2 and "truncated" not in " ".join(format_row(label, 0))
    assert format_row(label, 1)[-1].startswith("  truncated: the text is longer than this model reads")
    # A text with no token: the answer is the model's answer to an empty input, and says so.
    label["empty"] = np.array([True, False])
    assert format_row(label, 0)[-1].startswith("  empty: the text has no token")
    assert "empty" not in " ".join(format_row(label, 1))
    ner["empty"], ner["num_entities"] = np.array([True]), np.array([0])
    assert format_row(ner, 0) == ["  (no entities)", "  empty: the text has no token (empty, or only whitespace / "
                                  "control characters); this is the model's answer to an empty input ([CLS] [SEP])"]


def test_loadtest_cli_reports_json(server, capsys):
    from bert_keras.cli.main import main

    assert main(["loadtest", "--address", server.grpc_address, "--model", "tiny", "--requests", "30",
                 "--concurrency", "4", "--batch-size", "2", "--warmup", "2", "--json", "great movie"]) == 0
    report = json.loads(capsys.readouterr().out)
    # Without --json, no progress bar where stderr is no terminal (a log got its \r redraws).
    assert main(["loadtest", "--address", server.grpc_address, "--model", "tiny", "--requests", "5",
                 "great movie"]) == 0
    assert "req/s" not in capsys.readouterr().err
    assert report["requests"] == 30 and report["ok"] == 30 and report["errors"] == {}
    assert report["rows_per_request"] == 2 and report["qps"] > 0 and report["latency_ms"]["p50"] > 0
    # A request the model rejects stops the CLI before the load, with the reason.
    assert main(["loadtest", "--address", server.grpc_address, "--model", "tiny", "--requests", "5", "FAIL"]) == 2
    assert "asked to fail" in capsys.readouterr().err


def test_loadtest_without_texts_sends_a_pair_model_a_pair(server, capsys):
    """`bert-keras loadtest --model mrpc` (no TEXT) stopped with "this model takes sentence pairs ('The
    quick brown fox ...' is one sentence)", a sentence the user never typed: a pair signature gets a
    default pair; with --text-b the default sentence is the first text, as before."""
    from bert_keras.cli.main import main

    base = ["loadtest", "--address", server.grpc_address, "--model", "tiny", "--signature", "pair",
            "--requests", "3", "--warmup", "0", "--json"]
    assert main(base) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["ok"] == 3
    assert main([*base, "--text-b", "b"]) == 0, capsys.readouterr().err
    assert main([*base, "one sentence"]) == 2  # typed: still the user's to make a pair
    assert "TEXT argument 1 ('one sentence'): one sentence, but this model takes sentence pairs" in \
        capsys.readouterr().err


def test_loadtest_and_query_name_a_refused_text_by_its_input_line_or_argument(server, capsys, tmp_path):
    """A pair signature's bad text was named "row 2": 0-based, over the TEXT arguments and the
    lines of --input together, blank lines not counted."""
    from bert_keras.cli.main import main

    lines = tmp_path / "pairs.tsv"
    lines.write_text("a\tb\n\nc\td\tpos\n", encoding="utf-8")
    base = ["--address", server.grpc_address, "--model", "tiny", "--signature", "pair"]
    assert main(["loadtest", *base, "--requests", "3", "--warmup", "0", "x ||| y", "--input", str(lines)]) == 2
    err = capsys.readouterr().err
    assert f"--input {lines}, line 3 ('c\\td\\tpos'): 3 fields separated by tabs" in err, err
    assert main(["query", *base, "a ||| b", "lonely"]) == 2
    err = capsys.readouterr().err
    assert "TEXT argument 2 ('lonely'): one sentence, but this model takes sentence pairs" in err, err
    # A classifier of single texts (the default signature) refuses a pair, as `predict` does; it
    # was answered as the one text 'a ||| b'. --text-b was dropped without a word.
    single = ["--address", server.grpc_address, "--model", "tiny"]
    assert main(["query", *single, "fine", "a ||| b"]) == 2
    err = capsys.readouterr().err
    assert "TEXT argument 2 ('a ||| b'): a sentence pair ('A ||| B'), but this model reads single texts" in err, err
    assert main(["loadtest", *single, "--requests", "3", "--warmup", "0", "x", "--text-b", "y"]) == 2
    assert "--text-b 'y': this model reads single texts" in capsys.readouterr().err


def test_query_cli_against_a_real_bert_export(exported_model, capsys):
    """A tiny BERT pair classifier exported by serving.exporter: the CLI's answer is the SavedModel's."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 - registers the tokenizer's ops for the in-process reference

    from bert_keras.cli.main import main
    from serving.client import ServingClient
    from serving.server import InferenceEngine, ModelSource
    from serving.server.server import EmbeddedServer

    base_path, name, version = exported_model("classification")
    pairs = [("I loved this film.", "The actors were great."), ("The battery died.", "It was terrible.")]
    reference = tf.saved_model.load(os.path.join(base_path, name, str(version))).signatures["serving_default"](
        text=tf.constant([a for a, _ in pairs]), text_b=tf.constant([b for _, b in pairs]))
    server = EmbeddedServer(InferenceEngine([ModelSource(name, os.path.join(base_path, name))], poll_interval_s=0),
                            grpc_port=0, rest_port=0).start()
    try:
        assert main(["query", "--address", server.grpc_address, "--model", name,
                     *[f"{a} ||| {b}" for a, b in pairs]]) == 0
        out = capsys.readouterr().out
        for i, (a, b) in enumerate(pairs):
            label = reference["label"][i].numpy().decode()
            probabilities = reference["probabilities"][i].numpy()
            assert f"text={a!r} | text_b={b!r}" in out
            assert f"label: {label}  (p={probabilities.max():.3f})" in out
            assert "probabilities: " + "  ".join(f"{label}={p:.3f}" for label, p in
                                                 zip(("neg", "neutral", "pos"), probabilities)) in out
        with ServingClient(f"127.0.0.1:{server.rest_port}", name, protocol="rest") as client:
            (result,) = client.classify([{"text": pairs[0][0], "text_b": pairs[0][1]}],
                                        signature_name="classification")
        assert [label for label, _ in result] == ["neg", "neutral", "pos"]
        np.testing.assert_allclose([score for _, score in result], reference["probabilities"][0].numpy(), atol=1e-5)
    finally:
        server.stop(grace_s=2)


def test_a_request_over_max_batch_size_is_refused_as_tf_serving_does_and_the_client_splits_it(client):
    """Under batching TF Serving refuses a request of more rows than max_batch_size ("Task size 40
    is larger than maximum input batch size 16", INVALID_ARGUMENT); the client then sends it again
    in parts of 16 and joins the answers, row for row those of one call."""
    from serving.client import ServingClientError

    texts = [f"text number {i}" + "!" * (i % 7) for i in range(40)]
    with pytest.raises(ServingClientError) as raised:
        client.send(client.prepare_predict(texts))
    assert raised.value.code == "INVALID_ARGUMENT"
    assert "Task size 40 is larger than maximum input batch size 16" in raised.value.message
    out = client.predict(texts)
    assert out["length"].tolist() == [len(text) for text in texts]
    np.testing.assert_allclose(out["probabilities"], expected_probabilities(texts, 1), rtol=1e-5)
    pairs = client.predict({"text": [f"a{i}" for i in range(20)], "text_b": [f"b{i}" for i in range(20)]},
                           signature_name="pair")
    assert pairs["joined"].tolist() == [f"a{i}|b{i}".encode() for i in range(20)]
    assert client.predict(texts[:16])["length"].tolist() == [len(text) for text in texts[:16]]  # at the limit
    # numbers given as lists stay numbers in every part (cast to the input's float32, not sent as strings)
    scaled = client.predict({"x": [[1, 2, 3]] * 20 + [[0, 0, 1]] * 20}, signature_name="scale")
    np.testing.assert_allclose(scaled["y"], [[3.0, 5.0, 7.0]] * 20 + [[1.0, 1.0, 3.0]] * 20)


def test_parts_padded_per_request_are_joined_with_the_exports_padding():
    """A tagger's entities are `[B, E]`, E the most entities in that request: parts of one request
    differ in E and are padded to the widest with "" / -1 / 0 / False, as one call pads its rows."""
    from serving.client import _join_parts

    first = {"entity_text": np.array([[b"Ann", b"Paris"]], dtype=object), "start_char": np.array([[0, 13]]),
             "score": np.array([[0.9, 0.8]], np.float32), "flags": np.array([[True, True]]),
             "num_entities": np.array([2])}
    second = {"entity_text": np.array([[b"Bo"], [b""]], dtype=object), "start_char": np.array([[4], [-1]]),
              "score": np.array([[0.7], [0.0]], np.float32), "flags": np.array([[True], [False]]),
              "num_entities": np.array([1, 0])}
    joined = _join_parts([first, second])
    assert joined["entity_text"].tolist() == [[b"Ann", b"Paris"], [b"Bo", b""], [b"", b""]]
    assert joined["start_char"].tolist() == [[0, 13], [4, -1], [-1, -1]]
    np.testing.assert_allclose(joined["score"], [[0.9, 0.8], [0.7, 0.0], [0.0, 0.0]])
    assert joined["flags"].tolist() == [[True, True], [True, False], [False, False]]
    assert joined["num_entities"].tolist() == [2, 1, 0]
