"""Server-side batching: merging, per-request results, failing batches, full queues, draining on stop."""

import threading
import time

import numpy as np
import pytest

import engine_fixtures as ef

from serving.server.batching import CLIENT_ALIVE, BatchingOptions, BatchScheduler  # noqa: E402
from serving.server.errors import ServingError  # noqa: E402


def run_threads(n, fn):
    """Run fn(i) in n threads started together; returns results (exceptions are returned too)."""
    results = [None] * n
    barrier = threading.Barrier(n)

    def body(i):
        barrier.wait()
        try:
            results[i] = fn(i)
        except Exception as exc:  # collected for asserts
            results[i] = exc

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)  # a safety net: the threads end as soon as their requests are answered
    return results


class CountingModel:
    """y = 10 * x; remembers the batch sizes it was called with; fails on a negative x."""

    def __init__(self, delay_s=0.0):
        self.calls = []
        self.delay_s = delay_s
        self.lock = threading.Lock()

    def __call__(self, inputs):
        x = inputs["x"]
        with self.lock:
            self.calls.append(len(x))
        time.sleep(self.delay_s)
        if (x < 0).any():
            raise ServingError("INVALID_ARGUMENT", f"negative x in a batch of {len(x)}")
        return {"y": 10 * x, "rows": np.full(len(x), len(x))}


def test_merges_concurrent_requests_and_splits_results():
    # The 8 requests' 15 rows fill one batch, which runs when full: merged however slowly the threads
    # start (a 100 ms timeout split them on a loaded machine); the timeout only bounds a failure.
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=15, batch_timeout_micros=30_000_000, num_batch_threads=1))
    model = CountingModel()
    try:
        # request i sends i % 3 + 1 rows with values 100*i + row
        def request(i):
            x = 100.0 * i + np.arange(i % 3 + 1)
            return x, scheduler.submit("k", model, {"x": x}, rows=len(x))

        results = run_threads(8, request)
    finally:
        assert scheduler.stop()
    for result in results:
        assert not isinstance(result, Exception), result
        x, out = result
        np.testing.assert_array_equal(out["y"], 10 * x)  # each caller gets its own rows back
    assert sum(model.calls) == sum(i % 3 + 1 for i in range(8)) == 15
    assert len(model.calls) < 8  # merged
    assert max(model.calls) > 1
    stats = scheduler.stats()
    assert stats["tasks"] == 8 and stats["rows"] == 15 and stats["merged_batches"] >= 1


def test_a_request_whose_client_has_gone_is_dropped_when_its_batch_comes_up():
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=16, batch_timeout_micros=300_000, num_batch_threads=1))
    model = CountingModel()
    try:
        def request(i):
            CLIENT_ALIVE.set(lambda: i % 2 == 0)  # the odd requests' clients have gone (gRPC: is_active)
            x = 100.0 * i + np.arange(2)
            return x, scheduler.submit("k", model, {"x": x}, rows=2)

        results = run_threads(4, request)
    finally:
        assert scheduler.stop()
    assert sum(model.calls) == 4  # only the two live requests' rows ran
    for i, result in enumerate(results):
        if i % 2:
            assert isinstance(result, ServingError) and result.code == "CANCELLED", result
        else:
            np.testing.assert_array_equal(result[1]["y"], 10 * result[0])
    assert scheduler.stats()["abandoned"] == 2


def test_batches_respect_max_batch_size_and_keys():
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=4, batch_timeout_micros=50_000, num_batch_threads=2))
    model = CountingModel()
    try:
        results = run_threads(
            12, lambda i: scheduler.submit(("k", i % 2), model, {"x": np.array([float(i)] * (1 + i % 2))}, 1 + i % 2)
        )
    finally:
        scheduler.stop()
    assert all(not isinstance(r, Exception) for r in results)
    assert max(model.calls) <= 4
    for i, out in enumerate(results):
        # "rows" is the size of the batch it ran in; keys never mix: odd requests have 2 rows
        assert out["y"].tolist() == [10.0 * i] * (1 + i % 2)


def test_a_failing_merged_batch_isolates_the_bad_request_by_halves():
    """Issue 13 #7: one bad request among 16 costs 2 log2(16) = 8 extra calls, not 16 re-runs."""
    # 16 rows fill the batch, which runs when full (not after 300 ms, which a loaded machine could
    # miss: the first call was then not all 16 requests).
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=16, batch_timeout_micros=30_000_000, num_batch_threads=1))
    model = CountingModel()
    try:
        results = run_threads(
            16, lambda i: scheduler.submit("k", model, {"x": np.array([-1.0 if i == 5 else float(i)])}, 1)
        )
    finally:
        scheduler.stop()
    for i, result in enumerate(results):
        if i == 5:
            assert isinstance(result, ServingError) and result.code == "INVALID_ARGUMENT"
            assert "batch of 1" in result.message  # the error of its own run, not the merged one
        else:
            assert result["y"].tolist() == [10.0 * i]
    assert model.calls[0] == 16
    assert len(model.calls) == 1 + 8 and sorted(model.calls[1:]) == [1, 1, 2, 2, 4, 4, 8, 8]
    assert scheduler.stats()["batches_split"] == 4 and "batches_rerun_singly" not in scheduler.stats()


def test_batches_are_padded_up_to_the_next_allowed_batch_size():
    """`allowed_batch_sizes` was ignored: merged calls ran with whatever row count the batch had. TF
    Serving pads a batch up to the next allowed size with copies of its first row and drops their
    outputs; a size list not ending at max_batch_size is refused, in TF Serving's words."""
    options = BatchingOptions(max_batch_size=8, batch_timeout_micros=0, num_batch_threads=1,
                              allowed_batch_sizes=[2, 4, 8])
    assert options.allowed_batch_sizes == (2, 4, 8)
    assert [options.padded_rows(n) for n in (1, 2, 3, 5, 8)] == [2, 2, 4, 8, 8]
    seen = []

    def model(inputs):
        seen.append(inputs["x"].tolist())
        return {"y": 10 * inputs["x"]}

    scheduler = BatchScheduler(options)
    try:
        out = scheduler.submit("k", model, {"x": np.array([1.0, 2.0, 3.0])}, rows=3)
        single = scheduler.submit("k", model, {"x": np.array([7.0])}, rows=1)
        windows = scheduler.submit("k", model, {"x": np.array([5.0])}, rows=1, cost=3)  # counted in windows
    finally:
        scheduler.stop()
    assert out["y"].tolist() == [10.0, 20.0, 30.0] and single["y"].tolist() == [70.0]
    assert windows["y"].tolist() == [50.0]
    assert seen == [[1.0, 2.0, 3.0, 1.0], [7.0, 7.0], [5.0]]
    assert scheduler.stats()["padded_rows"] == 2
    from serving.server.model_config import ModelSource
    from serving.server.options import loading_line

    assert loading_line([ModelSource("m", "/m")], options) == (
        "loading m (/m) with batching (max_batch_size 8, padded to 2, 4, 8 rows, timeout 0 us)")
    for sizes, message in [((2, 4), "Last entry in allowed_batch_sizes must match max_batch_size; last entry "
                                    "was 4; expected 8"),
                           ((4, 2, 8), "allowed_batch_sizes entries must be monotonically increasing"),
                           ((0, 8), "0 is not a positive integer")]:
        with pytest.raises(ValueError, match=message):
            BatchingOptions(max_batch_size=8, allowed_batch_sizes=sizes)


def test_outputs_without_batch_dim_are_rerun_singly():
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=8, batch_timeout_micros=200_000, num_batch_threads=1))
    try:
        results = run_threads(3, lambda i: scheduler.submit("k", lambda d: {"n": np.array(len(d["x"]))}, {"x": np.ones(i + 1)}, i + 1))
    finally:
        scheduler.stop()
    assert [int(r["n"]) for r in results] == [1, 2, 3]


def test_a_padded_request_whose_outputs_have_no_batch_dim_runs_alone_once_known(caplog):
    """With allowed_batch_sizes, a lone request was padded, run, then (its output having no batch
    dimension) run again unpadded, every time, under a warning worded for a merged batch. The first
    such request still runs twice (its padded answer is wrong); the scheduler now remembers the
    signature and runs its later requests alone at once, and the warning says what happened."""
    calls = []

    def count(inputs):  # one number for the whole call: no row per input row
        calls.append(len(inputs["x"]))
        return {"n": np.array(len(inputs["x"]))}

    scheduler = BatchScheduler(BatchingOptions(max_batch_size=4, batch_timeout_micros=0, num_batch_threads=1,
                                               allowed_batch_sizes=(2, 4)))
    try:
        with caplog.at_level("WARNING", logger="serving.server.batching"):
            first = scheduler.submit("k", count, {"x": np.ones(1)}, rows=1)
            later = [scheduler.submit("k", count, {"x": np.ones(rows)}, rows=rows) for rows in (1, 3)]
    finally:
        scheduler.stop()
    assert int(first["n"]) == 1 and [int(out["n"]) for out in later] == [1, 3]
    assert calls == [2, 1, 1, 3]  # padded then alone once; then one unpadded call each
    assert scheduler.stats()["batches_rerun_singly"] == 1 and scheduler.stats()["padded_rows"] == 1
    [warning] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warning == ("output 'n' has no row per input row: the request of 1 row(s), padded to 2 "
                       "(allowed_batch_sizes), runs again unpadded; later requests to this signature run alone, "
                       "unmerged and unpadded")


def test_full_queue_answers_resource_exhausted():
    gate = threading.Event()
    started = threading.Event()

    def blocking(inputs):
        started.set()
        gate.wait(300)  # released by the test; the timeout only bounds a failure
        return {"y": inputs["x"]}

    options = BatchingOptions(max_batch_size=1, batch_timeout_micros=0, num_batch_threads=1, max_enqueued_batches=1)
    scheduler = BatchScheduler(options)
    results = {}
    first = threading.Thread(target=lambda: results.setdefault(0, scheduler.submit("k", blocking, {"x": np.ones(1)}, 1)))
    first.start()
    assert started.wait(60)  # the worker is busy with request 0
    second = threading.Thread(target=lambda: results.setdefault(1, scheduler.submit("k", blocking, {"x": np.ones(1)}, 1)))
    second.start()
    # Request 1 queued (a safety net: a loaded machine can start its thread late; after 5 s the
    # third request below was queued instead of refused, and waited for the gate).
    deadline = time.monotonic() + 60
    while scheduler.pending() < 1 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert scheduler.pending() == 1
    with pytest.raises(ServingError) as info:
        scheduler.submit("k", blocking, {"x": np.ones(1)}, 1)
    assert info.value.code == "UNAVAILABLE" and "max_enqueued_batches=1" in info.value.message  # as TF Serving
    assert info.value.message.startswith("The batch scheduling queue to which this task was submitted is full")
    gate.set()
    first.join(60)
    second.join(60)
    assert sorted(results) == [0, 1]
    assert scheduler.stats()["rejected"] == 1
    assert scheduler.stop()
    with pytest.raises(ServingError) as info:
        scheduler.submit("k", blocking, {"x": np.ones(1)}, 1)
    assert info.value.code == "UNAVAILABLE"


def test_stop_runs_queued_batches_without_waiting_for_the_timeout():
    # A batch timeout of an hour: the batch can only run during the test because stop() closes it.
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=64, batch_timeout_micros=3_600_000_000))
    model = CountingModel()
    box = {}
    thread = threading.Thread(target=lambda: box.setdefault("out", scheduler.submit("k", model, {"x": np.ones(2)}, 2)))
    thread.start()
    deadline = time.monotonic() + 300  # a safety net: the request is queued within milliseconds
    while scheduler.pending() < 1 and time.monotonic() < deadline:
        time.sleep(0.002)
    assert scheduler.pending() == 1, "the submitted request was not queued within 300 s"
    assert model.calls == []  # queued, waiting for its timeout
    assert scheduler.stop(60)  # True: the queued request ran, within stop()
    assert model.calls == [2]  # already run when stop() returns: one call with the request's 2 rows
    assert scheduler.pending() == 0
    thread.join(60)
    assert not thread.is_alive()
    assert box["out"]["y"].tolist() == [10.0, 10.0]
    assert scheduler.stats()["batches"] == 1


# ------------------------------------------------------------------ through the engine


@pytest.fixture
def engine_factory(session_tmp, tmp_path):
    from serving.server.engine import InferenceEngine, ModelSource

    engines = []

    def make(batching):
        base = ef.make_base_path(session_tmp, tmp_path / "tiny", {1: 1})
        engine = InferenceEngine([ModelSource("tiny", base)], batching=batching, poll_interval_s=0)
        engine.start()
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        engine.stop(5)


def _texts(*texts):
    array = np.empty(len(texts), dtype=object)
    array[:] = [t.encode() for t in texts]
    return array


def test_engine_batches_concurrent_predicts_and_keeps_results_apart(engine_factory):
    # The 12 requests' 18 rows fill one batch, which runs when full: merged however slowly the threads
    # start (a 1 s window could run the failing request alone on a loaded machine, then nothing was
    # split); the 5-minute timeout only bounds a failure.
    engine = engine_factory(BatchingOptions(max_batch_size=18, batch_timeout_micros=300_000_000, num_batch_threads=1))

    def check(results, failing=None):
        merged_rows = 0
        for i, result in enumerate(results):
            if i == failing:  # a failing request fails alone
                assert isinstance(result, ServingError) and result.code == "INVALID_ARGUMENT"
                assert "asked to fail" in result.message
                continue
            assert not isinstance(result, Exception), result
            texts, (version, signature, out) = result
            assert (version, signature) == (1, "serving_default")
            assert out["length"].tolist() == [len(t) for t in texts]
            np.testing.assert_allclose(out["probabilities"], ef.expected_probabilities(texts, 1), rtol=1e-5)
            merged_rows = max(merged_rows, int(out["batch_size"][0]))
        return merged_rows

    def request(i, failing=None):
        texts = ["x" * (i + 1)] * (1 + i % 2) if i != failing else ["ok", "FAIL"]
        return texts, engine.predict_arrays("tiny", inputs={"text": _texts(*texts)})

    # "batch_size" is the row count of the call a request ran in: > 2 means merged requests
    assert check(run_threads(12, request)) > 2
    stats = engine.batching_stats()
    assert stats["merged_batches"] >= 1 and stats["tasks"] == 12 and stats["rows"] == 18
    # one failing request in the mix (again 18 rows): the merged call fails, halves isolate the bad request
    check(run_threads(12, lambda i: request(i, failing=3)), failing=3)
    assert engine.batching_stats()["batches_split"] >= 1


def test_engine_runs_a_request_padded_to_an_allowed_batch_size(engine_factory):
    engine = engine_factory(BatchingOptions(max_batch_size=8, batch_timeout_micros=0, num_batch_threads=1,
                                            allowed_batch_sizes=(4, 8)))
    texts = ["a", "bb", "FAIL"]
    with pytest.raises(ServingError, match="asked to fail"):  # a padded request still fails alone
        engine.predict_arrays("tiny", inputs={"text": _texts(*texts)})
    _, _, out = engine.predict_arrays("tiny", inputs={"text": _texts(*texts[:2])})
    assert out["batch_size"].tolist() == [4, 4]  # the graph ran 4 rows: 2 of them padding
    assert out["length"].tolist() == [1, 2] and len(out["probabilities"]) == 2
    np.testing.assert_allclose(out["probabilities"], ef.expected_probabilities(texts[:2], 1), rtol=1e-5)


def test_engine_stop_drains_in_flight_requests(engine_factory):
    # A batch timeout of an hour: the four wait in the queue until stop() runs them (with 400 ms, a
    # loaded machine could run some before the others were queued, or before stop()).
    engine = engine_factory(BatchingOptions(max_batch_size=64, batch_timeout_micros=3_600_000_000, num_batch_threads=1))
    results = {}

    def request(i):
        results[i] = engine.predict_arrays("tiny", inputs={"text": _texts("text %d" % i)})

    threads = [threading.Thread(target=request, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60  # a safety net: the four are queued within milliseconds
    while engine._scheduler.pending() < 4 and time.monotonic() < deadline:
        time.sleep(0.002)
    assert engine._scheduler.pending() == 4
    assert engine.stop(drain_timeout_s=300)  # returns once the batch ran
    for t in threads:
        t.join(60)
    assert sorted(results) == [0, 1, 2, 3]
    assert all(out["length"].tolist() == [6] for _, _, out in results.values())
    with pytest.raises(ServingError) as info:
        engine.predict_arrays("tiny", inputs={"text": _texts("late")})
    assert info.value.code == "UNAVAILABLE" and "shutting down" in info.value.message
    assert not engine.is_ready()


def test_a_request_costs_its_windows_when_given_a_cost():
    # Long-text signatures: max_batch_size counts the windows a request becomes, not its rows.
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=8, batch_timeout_micros=100_000, num_batch_threads=1))
    model = CountingModel()
    try:
        results = run_threads(6, lambda i: scheduler.submit("k", model, {"x": np.array([float(i)])}, rows=1,
                                                            cost=5 if i % 2 else 1))
    finally:
        scheduler.stop()
    assert all(not isinstance(r, Exception) for r in results)
    stats = scheduler.stats()
    assert stats["rows"] == 6 and stats["cost"] == 3 * 5 + 3 * 1
    # no batch holds two requests of 5 windows (10 > 8); by rows alone all six would fit one batch
    assert stats["batches"] >= 3 and max(model.calls) <= 4


def test_a_task_size_refusal_survives_a_process_pool_round_trip():
    """`ServingError` pickles itself (a process-pool transport may send it back); `TaskSizeError`
    inherited that and came back as a plain ServingError, without rows / limit, so the warmup
    replay's `except TaskSizeError` (which names the export fix) no longer matched."""
    import pickle

    from serving.server.errors import TaskSizeError

    error = pickle.loads(pickle.dumps(TaskSizeError(8, 4, "export with --max-batch-size 4")))
    assert type(error) is TaskSizeError
    assert (error.rows, error.limit, error.code) == (8, 4, "INVALID_ARGUMENT")
    assert str(error) == ("INVALID_ARGUMENT: Task size 8 is larger than maximum input batch size 4 "
                          "(export with --max-batch-size 4)")
