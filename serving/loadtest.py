"""Load test for any TF Serving-compatible endpoint (gRPC or REST): QPS, latency percentiles, errors by code.

C concurrent clients send the same prepared predict requests (or a rotation of them) back
to back, for N requests or S seconds; every request is timed on the client, so latency
includes the network, (de)serialization and any server-side batching wait. Over gRPC the C
requests are in flight on one asyncio loop (`grpc.aio`), which leaves more CPU to a server
on the same machine; REST uses C threads.

Example:

    from serving.client import ServingClient
    from serving.loadtest import load_test

    client = ServingClient("127.0.0.1:8500", "sentiment")
    result = load_test(client, [{"text": ["great movie"]}], concurrency=8, requests=200)
    print(result.summary())          # QPS, p50/p95/p99 ms, errors by status code
    result.to_json()                 # the same as a dict

The function under test can be anything (`run_load(send, ...)`), so the same loop times
in-process calls in the benchmarks.
"""

import dataclasses
import itertools
import threading
import time

import numpy as np


@dataclasses.dataclass
class LoadTestResult:
    """What one load test measured.

    Attributes:
        requests: requests completed (ok + failed).
        ok: requests that succeeded.
        errors: {status code name: count} of failed requests ("INVALID_ARGUMENT", "UNAVAILABLE", ...).
        elapsed_s: wall time from the first request sent to the last answer.
        concurrency: requests in flight at once (threads, or coroutines over gRPC).
        rows_per_request: input rows in each request (QPS x rows = rows/s).
        latencies_ms: latency of every successful request, in completion order.
        first_error: one error message, to show what went wrong.
    """

    requests: int
    ok: int
    errors: dict
    elapsed_s: float
    concurrency: int
    rows_per_request: int = 1
    latencies_ms: list = dataclasses.field(default_factory=list, repr=False)
    first_error: str = ""

    @property
    def qps(self):
        return self.requests / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def rows_per_s(self):
        return self.ok * self.rows_per_request / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def percentile(self, q):
        """Latency percentile `q` (0-100) of the successful requests, in ms (nan when none succeeded)."""
        return float(np.percentile(self.latencies_ms, q)) if self.latencies_ms else float("nan")

    def to_json(self):
        return {
            "requests": self.requests, "ok": self.ok, "errors": dict(self.errors),
            "elapsed_s": round(self.elapsed_s, 4), "concurrency": self.concurrency,
            "rows_per_request": self.rows_per_request, "qps": round(self.qps, 2),
            "rows_per_s": round(self.rows_per_s, 2),
            "latency_ms": {
                "mean": round(float(np.mean(self.latencies_ms)), 3) if self.latencies_ms else None,
                **{f"p{q}": round(self.percentile(q), 3) if self.latencies_ms else None for q in (50, 95, 99)},
                "max": round(float(np.max(self.latencies_ms)), 3) if self.latencies_ms else None,
            },
            "first_error": self.first_error or None,  # null, as the latencies of a run without any
        }

    def summary(self):
        """Readable multi-line report."""
        lines = [
            f"requests      {self.requests} ({self.ok} ok, {self.requests - self.ok} failed) in {self.elapsed_s:.2f} s "
            f"at concurrency {self.concurrency}",
            f"throughput    {self.qps:.1f} requests/s, {self.rows_per_s:.1f} rows/s "
            f"({self.rows_per_request} rows/request)",
        ]
        if self.latencies_ms:
            lines.append(f"latency (ms)  p50 {self.percentile(50):.2f}  p95 {self.percentile(95):.2f}  "
                         f"p99 {self.percentile(99):.2f}  mean {np.mean(self.latencies_ms):.2f}  "
                         f"max {np.max(self.latencies_ms):.2f}")
        if self.errors:
            by_code = ", ".join(f"{code}: {count}" for code, count in sorted(self.errors.items()))
            lines.append(f"errors        {by_code}")
            lines.append(f"first error   {self.first_error[:300]}")
        return "\n".join(lines)


def _error_code(error):
    code = getattr(error, "code", None)
    if callable(code):  # grpc.RpcError
        code = code()
    name = getattr(code, "name", code)
    return name if isinstance(name, str) and name else f"CLIENT_{type(error).__name__}"


def check_settings(*, concurrency, batch_size, warmup, requests=None, duration_s=None):
    """Raises ValueError, naming `bert-keras loadtest`'s flags, for settings a load test cannot run with."""
    if concurrency < 1 or batch_size < 1 or warmup < 0:
        raise ValueError("--concurrency and --batch-size must be at least 1, --warmup at least 0")
    if requests is not None and requests < 1:
        raise ValueError("--requests must be at least 1")
    if duration_s is not None and duration_s <= 0:
        raise ValueError("--duration must be positive")


def _check_bounds(concurrency, requests, duration_s):
    if (requests is None) == (duration_s is None):
        raise ValueError("give exactly one of requests=N or duration_s=S")
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    if requests is not None and requests < 1:
        raise ValueError(f"requests must be at least 1, got {requests}")
    if duration_s is not None and duration_s <= 0:
        raise ValueError(f"duration must be positive, got {duration_s}")


def run_load(send, *, concurrency=1, requests=None, duration_s=None, warmup=0, rows_per_request=1,
             progress=False, description="requests"):
    """Calls `send(i)` from `concurrency` threads until `requests` calls or `duration_s` seconds.

    Args:
        send: function of the request index; an exception counts as a failure with the
            exception's `.code` (gRPC code name) or "CLIENT_<ExceptionType>".
        concurrency: threads sending at once (each waits for its answer before the next).
        requests: total requests to send (not counting warmup); or
        duration_s: keep sending for this many seconds (one of the two is required).
        warmup: requests sent (concurrently) and discarded before timing starts.
        rows_per_request: for the rows/s figure.
        progress: show a tqdm progress bar.
        description: the bar's label.

    Returns:
        LoadTestResult.
    """
    _check_bounds(concurrency, requests, duration_s)
    if warmup:
        warm = itertools.count()

        def warm_worker():
            while next(warm) < warmup:
                try:
                    send(0)
                except Exception:  # noqa: BLE001 - warmup failures show up in the timed run
                    pass

        threads = [threading.Thread(target=warm_worker, daemon=True) for _ in range(min(concurrency, warmup))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    counter = itertools.count()  # next() is atomic under the GIL: one index per request
    tallies = []  # one per thread, merged at the end (no shared counters to race on)
    start = time.perf_counter()
    deadline = None if duration_s is None else start + duration_s

    def worker():
        tally = _Tally(requests, deadline)
        tallies.append(tally)
        while True:
            index = next(counter)
            if tally.finished(index):
                break
            began = time.perf_counter()
            try:
                send(index)
            except Exception as error:  # noqa: BLE001 - counted by code
                tally.failed(error)
            else:
                tally.succeeded(began)

    threads = [threading.Thread(target=worker, name=f"load-{i}", daemon=True) for i in range(concurrency)]
    bar = _progress_bar(progress, requests, duration_s, description)
    for thread in threads:
        thread.start()
    last = 0
    while True:
        alive = [thread for thread in threads if thread.is_alive()]
        if not alive:
            break
        alive[0].join(0.2)
        if bar is not None:
            done = sum(tally.count for tally in tallies)
            now = done if requests is not None else min(time.perf_counter() - start, duration_s)
            bar.update(now - last)
            last = now
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    if bar is not None:
        bar.close()
    return _Tally.result(tallies, elapsed, concurrency, rows_per_request)


class _Tally:
    """One load worker's bookkeeping: when to stop, latencies, errors by status code."""

    def __init__(self, requests, deadline):
        self.requests, self.deadline = requests, deadline
        self.latencies, self.errors, self.first_error = [], {}, ""

    @property
    def count(self):
        return len(self.latencies) + sum(self.errors.values())

    def finished(self, index):
        """True once request `index` is past the request count or the deadline has passed."""
        if self.requests is not None and index >= self.requests:
            return True
        return self.deadline is not None and time.perf_counter() >= self.deadline

    def failed(self, error):
        code = _error_code(error)
        self.errors[code] = self.errors.get(code, 0) + 1
        if not self.first_error:
            self.first_error = f"{code}: {_error_message(error)}"

    def succeeded(self, began):
        self.latencies.append((time.perf_counter() - began) * 1000.0)

    @staticmethod
    def result(tallies, elapsed, concurrency, rows_per_request):
        latencies, errors = [], {}
        for tally in tallies:
            latencies.extend(tally.latencies)
            for code, count in tally.errors.items():
                errors[code] = errors.get(code, 0) + count
        first_error = next((tally.first_error for tally in tallies if tally.first_error), "")
        return LoadTestResult(requests=len(latencies) + sum(errors.values()), ok=len(latencies), errors=errors,
                              elapsed_s=elapsed, concurrency=concurrency, rows_per_request=rows_per_request,
                              latencies_ms=latencies, first_error=first_error)


def run_load_async(open_sender, request, *, concurrency=1, requests=None, duration_s=None, warmup=0,
                   rows_per_request=1, progress=False, description="requests"):
    """`run_load` for coroutines: `concurrency` requests in flight on one asyncio event loop.

    The load generator's own CPU is what it takes from a server on the same
    machine: one event loop and gRPC's asyncio stack cost the client less
    per request than a thread per in-flight request, so the server gets more
    of the cores (measured: 6-8% more rows/s from the same embedded server).

    Args:
        open_sender: async context manager factory (e.g. `ServingClient.async_sender`),
            entered inside the loop; its value `send` is passed to `request`.
        request: `request(send, i)` -> awaitable, the i-th request.
        concurrency, requests, duration_s, warmup, rows_per_request, progress,
            description: as `run_load`.

    Returns:
        LoadTestResult.
    """
    import asyncio

    _check_bounds(concurrency, requests, duration_s)

    async def main():
        async with open_sender() as send:
            return await timed(lambda index: request(send, index))

    async def timed(call):
        if warmup:
            warm = itertools.count()

            async def warm_worker():
                while next(warm) < warmup:
                    try:
                        await call(0)
                    except Exception:  # noqa: BLE001 - warmup failures show up in the timed run
                        pass

            await asyncio.gather(*(warm_worker() for _ in range(min(concurrency, warmup))))
        counter = itertools.count()
        start = time.perf_counter()
        # One loop, one thread: a single tally is shared by every coroutine.
        tally = _Tally(requests, None if duration_s is None else start + duration_s)
        bar = _progress_bar(progress, requests, duration_s, description)

        async def worker():
            while True:
                index = next(counter)
                if tally.finished(index):
                    return
                began = time.perf_counter()
                try:
                    await call(index)
                except Exception as error:  # noqa: BLE001 - counted by code
                    tally.failed(error)
                else:
                    tally.succeeded(began)
                if bar is not None:
                    done = tally.count if requests is not None else min(time.perf_counter() - start, duration_s)
                    bar.update(done - bar.n)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        if bar is not None:
            bar.close()
        return tally, time.perf_counter() - start

    tally, elapsed = asyncio.run(main())
    return _Tally.result([tally], elapsed, concurrency, rows_per_request)


def _in_event_loop():
    """True inside a running asyncio loop (e.g. a notebook), where `asyncio.run` is not allowed."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _error_message(error):
    details = getattr(error, "details", None)
    if callable(details):  # grpc.aio.AioRpcError
        return details()
    return getattr(error, "message", None) or error


def _progress_bar(progress, requests, duration_s, description):
    if not progress:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    if requests is not None:
        return tqdm(total=requests, unit="req", desc=description, leave=False)
    return tqdm(total=round(duration_s, 1), unit="s", desc=description, leave=False,
                bar_format="{l_bar}{bar}| {n:.1f}/{total:.1f} s")


def request_batches(rows, batch_size):
    """Predict inputs of `batch_size` rows each, rotating over `rows`; enough to send every row once.

    >>> request_batches({"text": ["a", "b", "c"]}, 2)
    [{'text': ['a', 'b']}, {'text': ['c', 'a']}]

    Args:
        rows: {input name: one value per row}, every list as long.
        batch_size: rows per request.
    """
    count = len(next(iter(rows.values())))
    requests = []
    for start in range(0, max(count, 1), batch_size):
        indices = [(start + k) % count for k in range(batch_size)]
        requests.append({name: [values[i] for i in indices] for name, values in rows.items()})
    return requests


def load_test(client, inputs_list, *, signature_name=None, concurrency=1, requests=None, duration_s=None,
              warmup=0, progress=False):
    """Load-tests `client.predict` with prepared requests, rotating through `inputs_list`.

    Args:
        client: a `serving.client.ServingClient` (gRPC or REST; one client is shared by all threads).
        inputs_list: list of predict inputs (dicts of input name -> rows, or lists of texts);
            request i sends `inputs_list[i % len(inputs_list)]`.
        signature_name: predict signature (default: the client's).
        concurrency, requests, duration_s, warmup, progress: see `run_load`.

    Returns:
        LoadTestResult (QPS, latency percentiles, errors by status code).
    """
    if not inputs_list:
        raise ValueError("inputs_list is empty: give at least one request's inputs")
    prepared = [client.prepare_predict(inputs, signature_name) for inputs in inputs_list]
    first = inputs_list[0]
    rows = len(next(iter(first.values()))) if isinstance(first, dict) else (
        1 if isinstance(first, (str, bytes)) else len(first))

    common = dict(concurrency=concurrency, requests=requests, duration_s=duration_s, warmup=warmup,
                  rows_per_request=rows, progress=progress, description=f"{client.protocol} x{concurrency}")
    if client.protocol == "grpc" and not _in_event_loop():
        # All requests in flight on one asyncio loop: less client CPU per request than threads.
        return run_load_async(client.async_sender, lambda send, index: send(prepared[index % len(prepared)]),
                              **common)

    def send(index):
        client.send(prepared[index % len(prepared)])

    return run_load(send, **common)
