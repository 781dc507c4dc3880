"""Every task's real export behind the embedded server: gRPC and REST answers equal the SavedModel's.

The six tiny fine-tuned models of `export_fixtures` are exported with
`serving.exporter` (in-graph tokenizer, dense outputs) and served together by one
`EmbeddedServer`, as `bert-keras serve --model-config-file` would. Each answer over
gRPC and over REST must equal what `tf.saved_model.load` gives in this process.
A new version exported while clients keep sending requests is picked up with no
failed request.
"""

import os
import shutil
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

INPUTS = {
    "classification": {"text": ["The cat sat on the mat .", "Paris is far"],
                       "text_b": ["A cat was sitting .", "London is near"]},
    "regression": {"text": ["The cat sat .", "the film was great"]},
    "ner": {"text": ["John Smith lives in New York .", "the"]},
    "squad": {"question": ["Who lives in Paris ?", "What is the film ?"],
              "context": ["John Smith lives in Paris , far from London .",
                          "the film was great and the battery died ."]},
    "multiple_choice": {"context": ["The cat sat on the mat .", "John went to Paris ."],
                        "endings": [["it slept", "it flew", "it sang", "it ran"],
                                    ["he ate", "he swam", "he read", "he sat"]]},
    "embedding": {"text": ["The cat sat on the mat .", "Paris is far from London ."]},
}


@pytest.fixture(scope="module")
def served(exported_model):
    from serving.server import BatchingOptions, InferenceEngine, ModelSource
    from serving.server.server import EmbeddedServer

    sources, expected = [], {}
    for kind, inputs in INPUTS.items():
        base_path, name, version = exported_model(kind)
        sources.append(ModelSource(name, os.path.join(base_path, name)))
        loaded = tf.saved_model.load(os.path.join(base_path, name, str(version)))
        outputs = loaded.signatures["serving_default"](
            **{key: tf.constant(value) for key, value in inputs.items()})
        expected[kind] = {key: value.numpy() for key, value in outputs.items()}
    engine = InferenceEngine(sources, batching=BatchingOptions(max_batch_size=8,
                                                               batch_timeout_micros=1000))
    server = EmbeddedServer(engine, grpc_port=0, rest_port=0).start()
    yield server, expected
    server.stop(grace_s=5)


def _assert_same(got, want, kind):
    assert sorted(got) == sorted(want), kind
    for key, value in want.items():
        if value.dtype.kind in "fc":
            np.testing.assert_allclose(got[key], value, rtol=1e-5, atol=1e-6, err_msg=f"{kind}.{key}")
        else:
            assert np.asarray(got[key]).tolist() == value.tolist(), f"{kind}.{key}"


@pytest.mark.parametrize("protocol", ["grpc", "rest"])
@pytest.mark.parametrize("kind", list(INPUTS))
def test_every_task_round_trips(served, protocol, kind):
    from serving.client import ServingClient

    server, expected = served
    address = server.grpc_address if protocol == "grpc" else server.rest_url
    with ServingClient(address, kind.replace("_", "-"), protocol=protocol) as client:
        got = client.predict(INPUTS[kind])
    if protocol == "rest":
        # JSON carries strings as text: compare as bytes like the gRPC answer.
        got = {k: np.vectorize(lambda s: s.encode() if isinstance(s, str) else s, otypes=[object])(v)
               if np.asarray(v).dtype.kind in "OU" else v for k, v in got.items()}
    _assert_same(got, expected[kind], kind)


@pytest.mark.parametrize("protocol", ["grpc", "rest"])
def test_classify_and_regress_apis_on_real_exports(served, protocol):
    from serving.client import ServingClient

    server, expected = served
    address = server.grpc_address if protocol == "grpc" else server.rest_url
    pairs = list(zip(INPUTS["classification"]["text"], INPUTS["classification"]["text_b"]))
    with ServingClient(address, "classification", protocol=protocol) as client:
        results = client.classify([{"text": a, "text_b": b} for a, b in pairs])
    probabilities = expected["classification"]["probabilities"]
    for row, result in enumerate(results):
        labels = [label.decode() if isinstance(label, bytes) else label for label, _ in result]
        assert len(labels) == probabilities.shape[1]
        np.testing.assert_allclose([score for _, score in result], probabilities[row], rtol=1e-5)
    with ServingClient(address, "regression", protocol=protocol) as client:
        scores = client.regress([{"text": text} for text in INPUTS["regression"]["text"]])
    np.testing.assert_allclose(scores, expected["regression"]["score"], rtol=1e-5, atol=1e-6)


def test_bad_text_is_refused_and_the_server_keeps_serving(served):
    from serving.client import ServingClient, ServingClientError

    server, expected = served
    with ServingClient(server.grpc_address, "ner") as client:
        with pytest.raises(ServingClientError) as error:
            client.predict({"text": np.array([b"ok", b"\xff\xfe broken"], dtype=object)})
        assert error.value.code == "INVALID_ARGUMENT" and "UTF-8" in error.value.message
        # A text with no token is answered (no word, no entity) and flagged, never refused.
        answer = client.predict({"text": ["", " \u200b"]})
        assert answer["empty"].tolist() == [True, True] and answer["num_entities"].tolist() == [0, 0]
        long_text = ("John Smith lives in New York . " * 40000)[:1 << 20]  # 1 MB: truncated, answered
        assert client.predict({"text": [long_text]})["num_entities"].shape == (1,)
        _assert_same(client.predict(INPUTS["ner"]), expected["ner"], "ner")


def test_new_export_is_hot_swapped_under_load_without_a_failed_request(finetuned_dir, tmp_path):
    from serving.client import ServingClient
    from serving.exporter import export_saved_model
    from serving.server import BatchingOptions, InferenceEngine, ModelSource
    from serving.server.server import EmbeddedServer

    source = finetuned_dir("classification")
    first = export_saved_model(source, str(tmp_path), "swap", check=False, progress=None)
    engine = InferenceEngine([ModelSource("swap", str(tmp_path / "swap"))],
                             batching=BatchingOptions(max_batch_size=8), poll_interval_s=0.2)
    server = EmbeddedServer(engine, grpc_port=0, rest_port=None).start()
    versions, failures, stop = [], [], threading.Event()

    def send():
        with ServingClient(server.grpc_address, "swap") as client:
            while not stop.is_set():
                try:
                    response = client.send(client.prepare_predict(INPUTS["classification"]))
                    versions.append(response.model_spec.version.value)  # the version that answered
                except Exception as error:  # any failure fails the test
                    failures.append(repr(error))

    threads = [threading.Thread(target=send) for _ in range(4)]
    try:
        for thread in threads:
            thread.start()
        deadline = time.time() + 300  # the first version answers before the second is exported (not a fixed 1 s)
        while time.time() < deadline and not versions and not failures:
            time.sleep(0.05)
        second = export_saved_model(source, str(tmp_path), "swap", check=False, progress=None)
        assert second.version == first.version + 1
        deadline = time.time() + 300  # a safety net: the second version loads (TF) under 4 clients' load
        while time.time() < deadline and (not versions or versions[-1] != second.version):
            time.sleep(0.2)
        time.sleep(0.5)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        server.stop(grace_s=5)
    assert failures == []
    assert versions[0] == first.version and versions[-1] == second.version
    shutil.rmtree(tmp_path / "swap")
