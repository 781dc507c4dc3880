"""Long requests are bounded in time (issue 40, case 3): a long-text request runs in parts of
whole texts; between parts it stops when its client has gone or the drain's time is up, and under
batching a short request waits for one part of a long one, not for all of it.

A tiny random classifier reading windows of 14 word pieces (`export_fixtures`); the parts are
made small (`CHUNK_WINDOWS` patched) so that one request is many parts. No wall-clock asserts:
the model's calls are counted and ordered with events.
"""

import threading
import time

import keras
import numpy as np
import pytest

import export_fixtures
from bert_keras import tasks

SEQ_LENGTH = 16
WORDS = export_fixtures.WORDS


@pytest.fixture(scope="module")
def long_text_export(tmp_path_factory):
    """(base path of model "docs", 20 texts of 100 words, predict's probabilities of them and of
    "a short text")."""
    root = tmp_path_factory.mktemp("long-requests")
    spec = export_fixtures.make_encoder_spec(str(root / "spec"))
    keras.utils.set_random_seed(0)
    classifier = tasks.TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=SEQ_LENGTH,
                                                      max_length=4000, stride=9)
    classifier.export(str(root / "models"), "docs", check=False, warmup_requests=0)
    rng = np.random.default_rng(0)
    texts = [" ".join(WORDS[i] for i in rng.integers(0, len(WORDS), 100)) for _ in range(20)]
    expected = classifier.predict(texts + ["a short text"])
    return str(root / "models" / "docs"), texts, expected


def _engine(base, monkeypatch, **kwargs):
    from serving.server import engine as engine_module
    from serving.server.engine import InferenceEngine, ModelSource
    from serving.server.request_validation import Limits

    monkeypatch.setattr(engine_module, "CHUNK_WINDOWS", 30)  # ~2 texts a part: 10 parts a request
    engine = InferenceEngine([ModelSource("docs", base)], poll_interval_s=0,
                             limits=Limits(max_windows_per_request=100_000), **kwargs)
    engine.start()
    return engine


def _counting_runner(engine, before_call=None):
    """Replaces the served signature's runner by one that records the rows of every call."""
    calls = []
    with engine.servable("docs") as servable:
        original = engine._runner(servable, "serving_default")

        def runner(arrays):
            rows = len(next(iter(arrays.values())))
            if before_call is not None:
                before_call(len(calls), rows)
            calls.append(rows)
            return original(arrays)

        servable.runners["serving_default"] = runner
    return calls


def _request(texts):
    return {"text": np.array([t.encode() for t in texts], dtype=object)}


def test_a_long_request_runs_in_parts_with_the_outputs_of_one_call(long_text_export, monkeypatch):
    base, texts, expected = long_text_export
    engine = _engine(base, monkeypatch)
    try:
        calls = _counting_runner(engine)
        probabilities = engine.predict_arrays("docs", inputs=_request(texts))[2]["probabilities"]
        assert len(calls) >= 5 and sum(calls) == 20, calls  # whole texts, every text once
        np.testing.assert_allclose(probabilities, expected[:20], atol=1e-5)
        calls.clear()
        engine.predict_arrays("docs", inputs=_request(texts[:1]))
        assert calls == [1]  # a short request is one call
    finally:
        engine.stop(drain_timeout_s=5)


def test_a_request_whose_client_has_gone_stops_between_parts(long_text_export, monkeypatch):
    from serving.server.batching import CLIENT_ALIVE
    from serving.server.errors import ServingError

    base, texts, _ = long_text_export
    engine = _engine(base, monkeypatch)
    alive = {"yes": True}
    try:
        def client_gives_up_during_part(index, rows):
            if index == 1:
                alive["yes"] = False  # a gRPC deadline passing while the second part runs

        calls = _counting_runner(engine, client_gives_up_during_part)
        token = CLIENT_ALIVE.set(lambda: alive["yes"])
        try:
            with pytest.raises(ServingError, match=r"CANCELLED: .*client went away.* after 2 of \d+ parts"):
                engine.predict_arrays("docs", inputs=_request(texts))
        finally:
            CLIENT_ALIVE.reset(token)
        assert len(calls) == 2
    finally:
        engine.stop(drain_timeout_s=5)


def test_under_batching_a_short_request_waits_for_one_part_not_the_whole_long_one(long_text_export, monkeypatch):
    from serving.server.engine import BatchingOptions

    base, texts, expected = long_text_export
    engine = _engine(base, monkeypatch, batching=BatchingOptions(max_batch_size=64, batch_timeout_micros=0,
                                                                 num_batch_threads=1))
    first_part_running, short_sent = threading.Event(), threading.Event()
    order = []
    try:
        def hold_the_first_part(index, rows):
            if index == 0:
                first_part_running.set()
                short_sent.wait(300)  # set once the short request is queued, while part 1 runs
            order.append(("call", rows))

        _counting_runner(engine, hold_the_first_part)
        results = {}

        def long_client():
            results["long"] = engine.predict_arrays("docs", inputs=_request(texts))[2]["probabilities"]
            order.append(("long done", None))

        worker = threading.Thread(target=long_client)
        worker.start()
        assert first_part_running.wait(300)
        short = threading.Thread(target=lambda: results.__setitem__(
            "short", engine.predict_arrays("docs", inputs=_request(["a short text"]))[2]["probabilities"]))
        short.start()
        # Part 1 goes on once the short request is in the queue (seen there, not assumed from the
        # thread's start: a slow thread queued it after part 2, then it ran after the long one).
        deadline = time.monotonic() + 300
        while engine._scheduler.pending() < 1 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert engine._scheduler.pending() == 1
        short_sent.set()
        short.join(300)
        assert not short.is_alive()
        order.append(("short done", None))
        worker.join(300)
    finally:
        engine.stop(drain_timeout_s=5)
    long_calls = [i for i, (what, rows) in enumerate(order) if what == "call" and rows > 1]
    assert order.index(("short done", None)) < order.index(("long done", None))
    assert order.index(("short done", None)) < long_calls[-1], order  # served between the long one's parts
    np.testing.assert_allclose(results["long"], expected[:20], atol=1e-5)
    np.testing.assert_allclose(results["short"], expected[20:], atol=1e-5)


def test_a_drain_stops_a_long_request_when_its_time_is_up(long_text_export, monkeypatch):
    from serving.server.errors import ServingError

    base, texts, _ = long_text_export
    engine = _engine(base, monkeypatch)
    part_running, errors, stopped = threading.Event(), [], threading.Event()

    def slow_parts(index, rows):
        if index == 1:
            part_running.set()
            stopped.wait(300)  # the second part outlasts the drain's grace period (set by the test)

    calls = _counting_runner(engine, slow_parts)

    def client():
        try:
            engine.predict_arrays("docs", inputs=_request(texts))
        except ServingError as exc:
            errors.append(exc)

    worker = threading.Thread(target=client)
    worker.start()
    assert part_running.wait(300)
    drained = engine.stop(drain_timeout_s=0.2)
    stopped.set()
    worker.join(300)
    assert drained is False
    assert len(errors) == 1 and errors[0].code == "UNAVAILABLE" and "stopped after 2 of" in errors[0].message
    assert len(calls) == 2  # nothing ran after the grace period


def test_the_default_limit_refuses_64_texts_of_8_kb_before_the_model_runs(long_text_export):
    # The round-3 probe: 64 texts of 8 KB cost 72-75 s of CPU under the old default (16,384
    # windows); the default limit (1,024, a few seconds) refuses them before any model call.
    from serving.server.engine import InferenceEngine, ModelSource
    from serving.server.errors import ServingError

    base, texts, _ = long_text_export
    engine = InferenceEngine([ModelSource("docs", base)], poll_interval_s=0)
    engine.start()
    try:
        calls = _counting_runner(engine)
        eight_kb = (" ".join(texts) * 4)[:8192]
        with pytest.raises(ServingError, match=r"RESOURCE_EXHAUSTED: .*64 text\(s\) .*limit of 1024 windows"):
            engine.predict_arrays("docs", inputs=_request([eight_kb] * 64))
        assert calls == []
        engine.predict_arrays("docs", inputs=_request(texts[:2]))  # and it serves on
        assert calls == [2]
    finally:
        engine.stop(drain_timeout_s=5)


def test_a_question_answering_request_is_bounded_and_run_by_its_contexts_windows(exported_model, monkeypatch):
    # A SpanQA export reads each context in up to `max_windows` windows (16 here): its requests
    # cost those windows, not their rows, against the limit and in parts (they cost their rows
    # before: 1,024 long contexts ran 16,384 windows).
    import os

    from serving.server import engine as engine_module
    from serving.server.engine import InferenceEngine, ModelSource
    from serving.server.errors import ServingError
    from serving.server.request_validation import Limits
    from serving.server.window_cost import QuestionContextCost

    base_path, name, _ = exported_model("squad")
    rng = np.random.default_rng(1)
    contexts = [" ".join(WORDS[i] for i in rng.integers(0, len(WORDS), 120)).encode() for _ in range(12)]
    request = {"question": np.array([b"what is it", b"who"] * 6, dtype=object),
               "context": np.array(contexts, dtype=object)}

    def served(limits, chunk_windows=None):
        if chunk_windows:
            monkeypatch.setattr(engine_module, "CHUNK_WINDOWS", chunk_windows)
        engine = InferenceEngine([ModelSource(name, os.path.join(base_path, name))], poll_interval_s=0,
                                 limits=limits)
        engine.start()
        try:
            with engine.servable(name) as servable:
                assert servable.window_cost == QuestionContextCost(seq_length=64, max_query_length=16, stride=16,
                                                                   max_windows=16)
                bound = servable.window_cost.cost(request, bound=True)
            calls = []
            with engine.servable(name) as servable:
                original = engine._runner(servable, "serving_default")

                def runner(arrays):
                    calls.append(len(arrays["question"]))
                    return original(arrays)

                servable.runners["serving_default"] = runner
            return engine.predict_arrays(name, inputs=request)[2], calls, bound
        finally:
            engine.stop(drain_timeout_s=5)

    whole, calls, bound = served(Limits())
    assert calls == [12] and 12 * 2 < bound <= 12 * 16  # (the export's warmup requests cost less)
    with pytest.raises(ServingError, match=rf"RESOURCE_EXHAUSTED: .*12 text\(s\) may read up to {bound} windows"):
        served(Limits(max_windows_per_request=bound - 1))
    parts, calls, _ = served(Limits(), chunk_windows=10)
    assert len(calls) > 1 and sum(calls) == 12
    assert set(whole) >= {"answer", "start_char", "score"}
    for key in whole:  # the same answers; scores as close as batches of other sizes give
        if whole[key].dtype.kind == "f":
            np.testing.assert_allclose(parts[key], whole[key], rtol=1e-5)
        else:
            np.testing.assert_array_equal(parts[key], whole[key])
