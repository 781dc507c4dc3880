"""Worker processes that write shards in parallel, and die (cleaning up) with their parent.

Workers start with multiprocessing's "forkserver" method: they are forked from
a clean server process that has imported this package (and so TensorFlow) once
but run no TF op — one TF start-up for all workers instead of one per worker
with "spawn", and no fork of a TF process that has run ops (its thread pools
may hold locks at the fork; the server's few import-time threads are idle). A script calling `write_pretraining_data` with `workers > 1` needs
the usual `if __name__ == "__main__":` guard.

The corpus goes to the workers as `.npy` files in a scratch directory that
they memory-map (no pickling of big arrays, one copy in the page cache). The
directory sits next to the output (or in the temp directory for remote
outputs) and is removed on every exit path: by the parent when it returns or
raises, and by the workers when the parent is killed (each worker watches its
parent from a thread; on its death it removes its half-written shard and the
scratch directory and exits). A rerun removes scratch directories of dead
processes.

Stopping: after a run that went well the workers are told to finish and are
joined (no signal). After an error or an interrupt (Ctrl-C reaches the parent
only: workers ignore SIGINT; the parent waits for them in short waits, so that
the interrupt is raised at once, `interruptible_map`) they get SIGTERM, which the same watching thread
takes with `sigtimedwait` while every other thread blocks it. A Python signal
handler is not enough there: an idle worker's main thread waits on the task
queue's lock in C, and a SIGTERM that lands just before it blocks only trips a
flag nobody reads again, so `Pool.terminate` waits for that worker forever.
"""

import atexit
import dataclasses
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import threading
import time

import numpy as np

from pipelines.atomic_writes import owner_is_gone, owner_tag, process_is_running
from pipelines.pretraining.instances import TokenizedCorpus
from pipelines.pretraining.shard_writer import remove_dead_writers_files, write_shard

# How often a worker checks that its parent is alive (seconds).
PARENT_POLL_SECONDS = 0.2
# How often the parent, waiting for the workers' shards, runs the signal handlers a Ctrl-C asked for (seconds).
WAKE_SECONDS = 0.2
_SCRATCH_INFIX = ".tokens-tmp-"


class ShardWorkers:
    """A pool of shard-writing processes; use as a context manager.

    Example:

    >>> with ShardWorkers(2) as workers:  # doctest: +SKIP
    ...     counts = workers.write(jobs, tokens, scratch_near="out/sample")

    Args:
        processes: number of worker processes (at least 2).
    """

    def __init__(self, processes: int):
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([__name__])
        self.processes = processes
        self._pool = context.Pool(processes, initializer=_start_parent_watch, initargs=(os.getpid(),))
        self._paths = []  # local shard paths handed to the workers: their temporary files to check on terminate

    def write(self, jobs, tokens: TokenizedCorpus, scratch_near: str):
        """Writes `jobs` with `tokens` shared through a scratch directory; returns instance counts in order."""
        directory = make_scratch_directory(scratch_near)
        self._paths.extend(job.path for job in jobs if "://" not in job.path)
        try:
            for field in dataclasses.fields(tokens):
                if getattr(tokens, field.name) is None:
                    continue
                np.save(os.path.join(directory, field.name + ".npy"), getattr(tokens, field.name))
            return interruptible_map(self._pool, _write_shard_in_worker, [(directory, job) for job in jobs])
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    def close(self):
        """Lets the workers finish their current job and exit, and waits for them."""
        if self._pool is not None:
            self._pool.close()
            self._pool.join()
            self._pool = None

    def terminate(self):
        """Stops the workers at once and removes their temporary files.

        A worker stopped mid-shard removes its own file, but SIGTERM can land while it is
        between jobs and the next job opens its file before the worker exits: once the
        workers are gone, the files named after a process that no longer runs are removed.
        """
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None
            remove_dead_writers_files(self._paths)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, traceback):
        if exc_type is None:
            self.close()
        else:
            self.terminate()


def interruptible_map(pool, function, items):
    """`pool.map(function, items, chunksize=1)`, with the caller woken every `WAKE_SECONDS` so that a
    Ctrl-C stops it at once.

    Python runs a signal handler in the main thread only, when that thread runs Python code. The
    kernel may hand a process's SIGINT to any thread that does not block it (TensorFlow's pools, the
    pool's own threads): its C handler only notes the signal, and a main thread waiting in `Pool.map`
    (a lock wait with no timeout) slept on until every shard was written, minutes later. A wait with
    a timeout returns to Python code, which raises the `KeyboardInterrupt`.
    """
    result = pool.map_async(function, items, chunksize=1)
    while not result.ready():
        result.wait(WAKE_SECONDS)
    return result.get()


def make_scratch_directory(near: str) -> str:
    """A fresh directory `{near}.tokens-tmp-<owner>-N` (local `near`; `owner_tag`: pid, start time,
    host), else one in the temp directory.

    Scratch directories of processes that no longer run are removed first.
    """
    if "://" in near:
        directory = tempfile.mkdtemp(prefix="pretraining-tokens-")
        atexit.register(shutil.rmtree, directory, True)
        return directory
    remove_stale_scratch(near)
    directory = tempfile.mkdtemp(prefix=f"{os.path.basename(near)}{_SCRATCH_INFIX}{owner_tag()}-",
                                 dir=os.path.dirname(near) or ".")
    atexit.register(shutil.rmtree, directory, True)  # also on exits that skip the caller's `finally`
    return directory


def remove_stale_scratch(near: str):
    """Removes `{near}.tokens-tmp-<owner>-*` directories whose process is gone (killed runs); a live
    run's, and another host's, stay (`owner_is_gone`; `PID` names of older versions by their pid)."""
    directory = os.path.dirname(near) or "."
    stem = os.path.basename(near) + _SCRATCH_INFIX
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if not name.startswith(stem):
            continue
        owner = name[len(stem):].split("-")[0]
        legacy = owner.isascii() and owner.isdigit()
        if (not process_is_running(int(owner))) if legacy else owner_is_gone(owner):
            shutil.rmtree(os.path.join(directory, name), ignore_errors=True)


# -- inside a worker -------------------------------------------------------------

_worker_tokens = {}
_current = {"temporary_path": None, "scratch": None}


def _start_parent_watch(parent_pid):
    """Pool initializer: exit (cleaning up) on SIGTERM or when the parent dies; leave SIGINT to the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watched_ppid = os.getppid()
    if hasattr(signal, "sigtimedwait"):
        # Blocked here, in the only thread so far, SIGTERM stays blocked in every
        # thread started later (TensorFlow's included): only `watch` takes it.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

        def terminated():
            return signal.sigtimedwait([signal.SIGTERM], PARENT_POLL_SECONDS) is not None
    else:  # macOS has no sigtimedwait: a handler, which unwinds `write_shard` (removing its file)
        signal.signal(signal.SIGTERM, _exit_on_sigterm)

        def terminated():
            time.sleep(PARENT_POLL_SECONDS)
            return False

    def watch():
        while True:
            if terminated() or os.getppid() != watched_ppid or not process_is_running(parent_pid):
                _remove_own_temporary_files()
                os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _exit_on_sigterm(signum, frame):
    # SystemExit unwinds `write_shard`, which removes the half-written shard.
    del signum, frame
    sys.exit(1)


def _remove_own_temporary_files():
    for path in (_current["temporary_path"],):
        if path:
            try:
                os.remove(path)
            except OSError:
                pass
    if _current["scratch"]:
        shutil.rmtree(_current["scratch"], ignore_errors=True)


def _write_shard_in_worker(directory_and_job):
    directory, job = directory_and_job
    if directory not in _worker_tokens:
        _worker_tokens.clear()
        _worker_tokens[directory] = TokenizedCorpus(
            **{name: np.load(os.path.join(directory, name + ".npy"), mmap_mode="r")
               for name in ("ids", "sentence_splits", "document_splits", "document_ids")
               if os.path.exists(os.path.join(directory, name + ".npy"))}
        )
    _current["scratch"] = directory
    _current["temporary_path"] = job.temporary_path if "://" not in job.path else None
    try:
        return write_shard(job, _worker_tokens[directory])
    finally:
        _current["temporary_path"] = None


__all__ = ["ShardWorkers", "interruptible_map", "make_scratch_directory", "process_is_running", "remove_stale_scratch"]
