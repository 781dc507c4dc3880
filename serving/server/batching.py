"""Server-side dynamic batching: merge concurrent requests into one model call.

TF Serving's batching semantics with the same knobs (--batching_parameters_file):
requests with the same queue key (model version, signature, and the non-batch shape of
every input) join the queue's open batch until it holds `max_batch_size` rows (or units of
the request's `cost`: the windows of a long-text signature, `serving.server.window_cost`) or
`batch_timeout_micros` have passed since its first request; `num_batch_threads` workers run
closed batches, oldest first; a queue holding `max_enqueued_batches` batches refuses new
work with UNAVAILABLE (TF Serving's shared batch scheduler: "The batch scheduling queue to which
this task was submitted is full"; REST 503, which clients retry) instead of growing without bound.
With `allowed_batch_sizes`, a batch is padded up to the next allowed size with copies of its
first row (their outputs dropped), as TF Serving's batching session pads.

A worker concatenates each input along dim 0 (one copy), calls `run_fn` once, and hands
every caller a view of its own rows. If the merged call fails, the batch is split in two
halves and each half is run again (recursively), so one bad request among n costs about
2 log2(n) extra calls, not n, and never fails another request. Only when an output has no
row per input row (the signature does not keep rows apart) is each request re-run alone; the
scheduler then remembers that `run_fn` and runs its later requests alone at once (unmerged,
unpadded: one call each, not a wasted merged or padded call first).

A request whose client has gone (a gRPC call cancelled or past its deadline; a REST client
that closed its connection) is dropped when its batch comes up, with CANCELLED, instead of
running for nobody ahead of the requests behind it. The front ends set `CLIENT_ALIVE` for the
thread that handles the request (gRPC: `context.is_active`; REST: the connection is open).

Example:
    >>> import numpy as np
    >>> scheduler = BatchScheduler(BatchingOptions(max_batch_size=8, batch_timeout_micros=1000))
    >>> double = lambda inputs: {"y": inputs["x"] * 2}
    >>> scheduler.submit("k", double, {"x": np.array([1.0, 2.0])}, rows=2)["y"].tolist()
    [2.0, 4.0]
    >>> scheduler.stop()
    True
"""

from __future__ import annotations

import collections
import contextvars
import dataclasses
import logging
import threading
import time
import weakref
from typing import Callable, Hashable, Mapping

import numpy as np

from serving.server.errors import ServingError

log = logging.getLogger(__name__)

# Set by a front end for the thread that handles a request: a function that says whether the
# client still waits for the answer (gRPC: `context.is_active`). None: it always does.
CLIENT_ALIVE: contextvars.ContextVar = contextvars.ContextVar("client_alive", default=None)


def check_allowed_batch_sizes(sizes, max_batch_size: int, *, where: str = "allowed_batch_sizes") -> tuple:
    """`sizes` as a tuple, checked as TF Serving checks allowed_batch_sizes when it loads a model.

    Positive integers, monotonically increasing, the last equal to `max_batch_size` (TF Serving's
    messages); empty is allowed (no padding). The server's `BatchingOptions` and the deploy kit's
    `BatchingSettings` both hold their sizes to this one rule. `where` names the field in the error.

    >>> check_allowed_batch_sizes([8, 16], 16)
    (8, 16)
    >>> check_allowed_batch_sizes((8, 16), 32)
    Traceback (most recent call last):
    ...
    ValueError: Last entry in allowed_batch_sizes must match max_batch_size; last entry was 16; expected 32
    """
    if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__iter__"):
        raise ValueError(f"{where} must be a sequence of integers, got {sizes!r}")
    sizes = tuple(sizes)
    for size in sizes:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"{where}: {size!r} is not a positive integer")
    if any(a >= b for a, b in zip(sizes, sizes[1:])):
        raise ValueError(f"allowed_batch_sizes entries must be monotonically increasing, got {list(sizes)}")
    if sizes and sizes[-1] != max_batch_size:
        raise ValueError(f"Last entry in allowed_batch_sizes must match max_batch_size; last entry was "
                         f"{sizes[-1]}; expected {max_batch_size}")
    return sizes


@dataclasses.dataclass(frozen=True)
class BatchingOptions:
    """TF Serving's batching parameters.

    Args:
        max_batch_size: Most rows in one merged call (or cost units: the windows of a
            long-text signature, `serving.server.window_cost`).
        batch_timeout_micros: Longest a request waits for others to join its batch.
        num_batch_threads: Worker threads running batches (the parallelism of model calls).
        max_enqueued_batches: Batches a queue may hold (open + waiting) before new requests
            get UNAVAILABLE.
        allowed_batch_sizes: The batch sizes a merged call may have (empty: any): a batch of
            fewer rows is padded up to the next one with copies of its first row, whose outputs
            are dropped, as TF Serving pads (fixed shapes: no retracing per batch size). The
            sizes increase and the last is `max_batch_size` (TF Serving refuses others at load:
            "Last entry in allowed_batch_sizes must match max_batch_size"). A batch counted in
            windows (long-text signatures) is not padded: a copy of a document is more windows.
    """

    max_batch_size: int = 32
    batch_timeout_micros: int = 2000
    num_batch_threads: int = 2
    max_enqueued_batches: int = 100
    allowed_batch_sizes: tuple = ()

    def __post_init__(self):
        for field in dataclasses.fields(self):
            if field.name == "allowed_batch_sizes":
                continue
            value = getattr(self, field.name)
            minimum = 0 if field.name == "batch_timeout_micros" else 1
            if not isinstance(value, int) or value < minimum:
                raise ValueError(f"BatchingOptions.{field.name} must be an integer >= {minimum}, got {value!r}")
        object.__setattr__(self, "allowed_batch_sizes", check_allowed_batch_sizes(
            self.allowed_batch_sizes, self.max_batch_size, where="BatchingOptions.allowed_batch_sizes"))

    def padded_rows(self, rows: int) -> int:
        """The rows a merged call of `rows` rows runs with: the smallest allowed batch size that
        holds them (`rows` itself without allowed sizes, or past the last).

        >>> BatchingOptions(max_batch_size=16, allowed_batch_sizes=(4, 8, 16)).padded_rows(5)
        8
        """
        return next((size for size in self.allowed_batch_sizes if size >= rows), rows)


class _Done:
    """A one-shot "done" signal: a lock taken at creation, released when the result is set.

    Cheaper than threading.Event (no Condition, no waiter list) on the per-request path.
    """

    __slots__ = ("_lock", "_set")

    def __init__(self):
        self._lock = threading.Lock()
        self._lock.acquire()
        self._set = False

    def set(self):
        if not self._set:
            self._set = True
            self._lock.release()

    def is_set(self):
        return self._set

    def wait(self):
        self._lock.acquire()
        self._lock.release()  # idempotent for a second waiter


class _Task:
    __slots__ = ("inputs", "rows", "cost", "event", "result", "error", "alive")

    def __init__(self, inputs, rows, cost, alive=None):
        self.inputs = inputs
        self.rows = rows
        self.cost = cost
        self.event = _Done()
        self.result = None
        self.error = None
        self.alive = alive

    def abandoned(self):
        """Whether the client has gone (its front end says so); never raises."""
        try:
            return self.alive is not None and not self.alive()
        except Exception:  # noqa: BLE001 - a front end's check must not fail the batch
            return False


class _Batch:
    __slots__ = ("tasks", "rows", "cost", "deadline", "closed")

    def __init__(self, deadline):
        self.tasks = []
        self.rows = 0
        self.cost = 0
        self.deadline = deadline
        self.closed = False


class _Queue:
    __slots__ = ("key", "run_fn", "batches")

    def __init__(self, key, run_fn):
        self.key = key
        self.run_fn = run_fn
        self.batches = collections.deque()


class _NotBatchable(Exception):
    pass


class BatchScheduler:
    """Queues keyed by compatibility, shared worker threads, bounded queues.

    Args:
        options: The batching parameters.
        name: Prefix of the worker thread names.
    """

    def __init__(self, options: BatchingOptions, name: str = "batch"):
        self.options = options
        self._timeout_s = options.batch_timeout_micros / 1e6
        self._cond = threading.Condition(threading.Lock())
        self._queues: dict = {}
        self._stopping = False
        self._flushing = False  # a drain began: every batch closes as soon as it is made
        self._stats = collections.Counter()
        # run_fns whose outputs had no row per input row: their requests run alone from then on
        self._run_singly = weakref.WeakSet()
        self._workers = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
            for i in range(options.num_batch_threads)
        ]
        for worker in self._workers:
            worker.start()

    # ------------------------------------------------------------------ caller side

    def submit(
        self,
        key: Hashable,
        run_fn: Callable[[Mapping[str, np.ndarray]], Mapping[str, np.ndarray]],
        inputs: Mapping[str, np.ndarray],
        rows: int,
        cost: int | None = None,
    ) -> Mapping[str, np.ndarray]:
        """Run `inputs` (with `rows` rows) as part of a batch; blocks until done.

        Args:
            key: Requests with equal keys may be merged; the key must imply equal input
                names, dtypes and non-batch dimensions.
            run_fn: Runs a merged batch: {name: array [N, ...]} -> {name: array [N, ...]}.
                All requests with one key must pass the same function.
            inputs: This request's arrays, all with `rows` rows.
            rows: dim 0 of every input.
            cost: what the request counts against `max_batch_size` (default: `rows`), e.g.
                the windows its long texts become inside the model.

        Returns:
            {name: this request's rows of each output} (views into the batch's outputs).

        Raises:
            ServingError: UNAVAILABLE when the queue is full or after stop(),
                or whatever `run_fn` raised for this request.
        """
        cost = rows if cost is None else max(1, int(cost))
        task = _Task(inputs, rows, cost, CLIENT_ALIVE.get())
        limit = self.options.max_batch_size
        with self._cond:
            if self._stopping:
                raise ServingError("UNAVAILABLE", "server is shutting down")
            queue = self._queues.get(key)
            if queue is None:
                queue = self._queues[key] = _Queue(key, run_fn)
            batches = queue.batches
            batch = batches[-1] if batches and not batches[-1].closed else None
            if batch is not None and batch.cost + cost > limit:
                batch.closed = True  # cannot take this request: ready to run now
                self._cond.notify()
                batch = None
            if batch is None:
                if len(batches) >= self.options.max_enqueued_batches:
                    self._stats["rejected"] += 1
                    raise ServingError(
                        "UNAVAILABLE",
                        f"The batch scheduling queue to which this task was submitted is full ({len(batches)} batches of up to {limit} rows waiting; "
                        f"max_enqueued_batches={self.options.max_enqueued_batches}); retry later",
                    )
                batch = _Batch(time.monotonic() + self._timeout_s)
                batches.append(batch)
                self._cond.notify()
            batch.tasks.append(task)
            batch.rows += rows
            batch.cost += cost
            if batch.cost >= limit or self._flushing:
                batch.closed = True
                self._cond.notify()
        task.event.wait()
        if task.error is not None:
            raise task.error
        return task.result

    def run_now(self, run_fn, inputs: Mapping[str, np.ndarray], rows: int, cost: int | None = None):
        """Run `inputs` at once in the calling thread, alone, but padded as a batch of its rows is
        (`allowed_batch_sizes`; the padding's outputs dropped): a warmup record, which TF Serving
        replays through its batching session, so the padded shapes are the ones warmed up.

        >>> scheduler = BatchScheduler(BatchingOptions(max_batch_size=4, allowed_batch_sizes=(2, 4)))
        >>> seen = []
        >>> out = scheduler.run_now(lambda d: seen.append(len(d["x"])) or {"y": d["x"] * 2}, {"x": np.ones(3)}, 3)
        >>> seen, out["y"].tolist()
        ([4], [2.0, 2.0, 2.0])
        >>> scheduler.stop()
        True
        """
        cost = rows if cost is None else max(1, int(cost))
        task = _Task(inputs, rows, cost)
        self._run(run_fn, [task], rows)
        if task.error is not None:
            raise task.error
        return task.result

    # ------------------------------------------------------------------ worker side

    def _next_batch(self):
        """Pop the oldest ready batch, or return the seconds to wait for one (None: forever)."""
        now = time.monotonic()
        best_queue, best_deadline, wait = None, None, None
        for queue in self._queues.values():
            front = queue.batches[0]
            if front.closed or front.deadline <= now or self._stopping:
                if best_deadline is None or front.deadline < best_deadline:
                    best_queue, best_deadline = queue, front.deadline
            else:
                remaining = front.deadline - now
                wait = remaining if wait is None else min(wait, remaining)
        if best_queue is None:
            return None, wait
        batch = best_queue.batches.popleft()
        batch.closed = True
        if not best_queue.batches:
            del self._queues[best_queue.key]
        stats = self._stats  # counted under the lock: workers run concurrently
        stats["batches"] += 1
        stats["tasks"] += len(batch.tasks)
        stats["rows"] += batch.rows
        stats["cost"] += batch.cost
        if len(batch.tasks) > 1:
            stats["merged_batches"] += 1
        return (best_queue, batch), None

    def _work(self):
        while True:
            with self._cond:
                while True:
                    item, wait = self._next_batch()
                    if item is not None:
                        if self._queues:
                            self._cond.notify()  # more may be ready: wake another worker
                        break
                    if self._stopping and not self._queues:
                        return
                    self._cond.wait(wait)
            queue, batch = item
            waiting = [task for task in batch.tasks if not task.abandoned()]
            if len(waiting) < len(batch.tasks):
                for task in batch.tasks:
                    if task not in waiting:
                        task.error = ServingError("CANCELLED", "the client went away (cancelled, or past its "
                                                  "deadline) before its request ran")
                        task.event.set()
                with self._cond:
                    self._stats["abandoned"] += len(batch.tasks) - len(waiting)
                if not waiting:
                    continue
            try:
                self._run(queue.run_fn, waiting, sum(task.rows for task in waiting))
            except BaseException:  # never lose a worker (or leave callers waiting)
                log.exception("batch worker failed")
                for task in waiting:
                    if not task.event.is_set():
                        task.error = ServingError("INTERNAL", "batch worker failed")
                        task.event.set()

    def _padding(self, tasks, rows):
        """Rows of padding the batch of `tasks` gets (`BatchingOptions.allowed_batch_sizes`); none
        for a batch counted in windows (a copied row would add a document's windows)."""
        if not self.options.allowed_batch_sizes or any(t.cost != t.rows for t in tasks):
            return 0
        return self.options.padded_rows(rows) - rows

    def _run(self, run_fn, tasks, rows):
        padding = self._padding(tasks, rows)
        with self._cond:
            singly = run_fn in self._run_singly
        if singly or (len(tasks) == 1 and not padding):
            for task in tasks:
                self._run_alone(run_fn, task)
            return
        try:
            names = tasks[0].inputs.keys()
            # TF Serving's padding: copies of the first row of the first request, dropped after the call.
            parts = [t.inputs for t in tasks]
            if padding:
                parts.append({name: np.repeat(tasks[0].inputs[name][:1], padding, axis=0) for name in names})
            merged = {name: np.concatenate([part[name] for part in parts]) for name in names}
            if padding:
                with self._cond:
                    self._stats["padded_rows"] += padding
            outputs = run_fn(merged)
            for name, array in outputs.items():
                if not isinstance(array, np.ndarray) or array.ndim == 0 or array.shape[0] != rows + padding:
                    raise _NotBatchable(name)
        except _NotBatchable as exc:
            # The signature does not keep rows apart: run each request alone (unpadded), now and later.
            if len(tasks) == 1:
                what = (f"the request of {rows} row(s), padded to {rows + padding} (allowed_batch_sizes), "
                        "runs again unpadded")
            else:
                what = f"the merged batch of {len(tasks)} requests runs again one request at a time"
            log.warning("output %r has no row per input row: %s; later requests to this signature run alone, "
                        "unmerged and unpadded", str(exc), what)
            with self._cond:
                self._stats["batches_rerun_singly"] += 1
                try:
                    self._run_singly.add(run_fn)
                except TypeError:  # a callable that takes no weak reference: it is tried merged again
                    pass
            for task in tasks:
                self._run_alone(run_fn, task)
            return
        except BaseException as exc:
            if len(tasks) == 1:  # padded, alone: its own failure
                tasks[0].error = exc
                tasks[0].event.set()
                return
            # One request made the merged batch fail: isolate it by halves, so the others
            # still run merged and only the bad one fails.
            with self._cond:
                self._stats["batches_split"] += 1
            half = len(tasks) // 2
            for part in (tasks[:half], tasks[half:]):
                self._run(run_fn, part, sum(t.rows for t in part))
            return
        start = 0
        for task in tasks:
            end = start + task.rows
            task.result = {name: array[start:end] for name, array in outputs.items()}
            start = end
            task.event.set()

    @staticmethod
    def _run_alone(run_fn, task):
        try:
            task.result = run_fn(task.inputs)
        except BaseException as exc:
            task.error = exc
        task.event.set()

    # ------------------------------------------------------------------ lifecycle

    def stats(self) -> dict:
        """Counters: batches, tasks, rows, merged_batches, batches_split, batches_rerun_singly, rejected,
        abandoned (requests dropped because their client had gone), padded_rows (allowed_batch_sizes)."""
        with self._cond:
            return dict(self._stats)

    def pending(self) -> int:
        """Requests waiting in queues (not counting batches being run)."""
        with self._cond:
            return sum(len(b.tasks) for q in self._queues.values() for b in q.batches)

    def flush(self, keep_flushing: bool = False) -> None:
        """Close every open batch so it runs now instead of waiting for its timeout; with
        `keep_flushing`, every later batch too (a drain: nothing waits for more requests)."""
        with self._cond:
            if keep_flushing:
                self._flushing = True
            for queue in self._queues.values():
                for batch in queue.batches:
                    batch.closed = True
            self._cond.notify_all()

    def stop(self, timeout_s: float = 30.0) -> bool:
        """Refuse new work, run what is queued (without waiting for batch timeouts), stop workers.

        Args:
            timeout_s: Longest wait for queued batches. Requests still queued after it fail
                with UNAVAILABLE.

        Returns:
            True when every queued request ran.
        """
        deadline = time.monotonic() + timeout_s
        with self._cond:
            self._stopping = True
            for queue in self._queues.values():
                for batch in queue.batches:
                    batch.closed = True
            self._cond.notify_all()
        for worker in self._workers:
            worker.join(max(0.0, deadline - time.monotonic()))
        drained = not any(w.is_alive() for w in self._workers)
        if not drained:
            with self._cond:
                for queue in self._queues.values():
                    for batch in queue.batches:
                        for task in batch.tasks:
                            task.error = ServingError("UNAVAILABLE", "server shut down before the request ran")
                            task.event.set()
                self._queues.clear()
        return drained
