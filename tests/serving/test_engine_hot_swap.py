"""Hot swap: a new version appears under load; no request fails, the new version takes over, the old one unloads."""

import os
import shutil
import threading
import time

import numpy as np

import engine_fixtures as ef

from serving.server.batching import BatchingOptions  # noqa: E402
from serving.server.engine import InferenceEngine, ModelSource  # noqa: E402


def wait_for(condition, what, seconds=300.0):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not within {seconds:g} s: {what}"
        time.sleep(0.01)


def test_hot_swap_under_load_fails_no_request(session_tmp, tmp_path):
    base = ef.make_base_path(session_tmp, tmp_path / "tiny", {1: 1})
    staged = str(tmp_path / "staging-2")
    shutil.copytree(ef.built_model(session_tmp, 2), staged)  # copied before traffic starts
    engine = InferenceEngine(
        [ModelSource("tiny", base)],
        batching=BatchingOptions(max_batch_size=16, batch_timeout_micros=1000),
        poll_interval_s=0.1,
    )
    engine.start()
    text = np.array([b"hot swap"], dtype=object)
    failures, seen, lock = [], [], threading.Lock()
    stop = threading.Event()

    def client():
        while not stop.is_set():
            try:
                version, _, out = engine.predict_arrays("tiny", inputs={"text": text})
                assert out["version"].tolist() == [version]  # the answer comes from the version named
                with lock:
                    seen.append(version)
            except Exception as exc:  # any failure fails the test
                with lock:
                    failures.append(repr(exc))

    try:
        old = engine._registry.acquire("tiny")
        old.release()
        threads = [threading.Thread(target=client) for _ in range(8)]
        for t in threads:
            t.start()
        # Counted answers, not fixed sleeps: a loaded machine answers fewer requests a second.
        wait_for(lambda: len(seen) >= 20, "20 answers from version 1")
        os.rename(staged, os.path.join(base, "2"))  # atomic appearance, as the exporter writes
        # A safety net ending when version 2 is served: it loads in seconds on a quiet machine, a loaded
        # one (another worker training, 8 client threads) can take more than 30 s.
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            states = {s["version"]: s["state"] for s in engine.model_status("tiny")}
            if states.get(2) == "AVAILABLE" and states.get(1) == "END":
                break
            time.sleep(0.05)
        wait_for(lambda: 2 in seen and len(seen) - seen.index(2) >= 100, "100 answers since the first of version 2")
        stop.set()
        for t in threads:
            t.join(60)
        assert failures == []
        assert states == {2: "AVAILABLE", 1: "END"}
        assert 1 in seen and 2 in seen
        first_two = seen.index(2)
        assert set(seen[first_two + 50:]) == {2}  # (a few in-flight v1 answers may land after the first v2)
        assert len(seen) > 50
        assert old.loaded is None and old.functions == {} and old.in_flight == 0  # unloaded
        _, _, out = engine.predict_arrays("tiny", inputs={"text": text})
        assert out["version"].tolist() == [2]
    finally:
        stop.set()
        engine.stop(5)
