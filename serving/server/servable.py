"""One version of one model while it is served: its state, signatures, functions and reference count.

A request holds a reference from `try_acquire` (through `ModelRegistry.acquire`) to
`release`; unloading refuses new references and waits for the count to reach zero
(`close_and_wait`), which is why a hot swap fails no request. States follow TF Serving's
ModelVersionStatus: START, LOADING, AVAILABLE, UNLOADING, END.

Example:
    >>> servable = ServableVersion("tiny", 1, "/models/tiny/1")
    >>> servable.try_acquire(), servable.in_flight
    (True, 1)
    >>> servable.release(); servable.close_and_wait(0.1)
    True
"""

from __future__ import annotations

import threading

from serving.server.version_files import snapshot

START, LOADING, AVAILABLE, UNLOADING, END = "START", "LOADING", "AVAILABLE", "UNLOADING", "END"


class ServableVersion:
    """One version of one model: its state, signatures, loaded functions and in-flight count.

    Attributes:
        model_name, version, path: Identity.
        state: START | LOADING | AVAILABLE | UNLOADING | END.
        error: ServingError for a failed load (state END), else None.
        signatures: {key: SignatureInfo} for every SignatureDef in saved_model.pb.
        signature_def_map: tensorflow.serving.SignatureDefMap (for GetModelMetadata).
        functions: {key: callable signature function} (loaded.signatures).
    """

    def __init__(self, model_name: str, version: int, path: str):
        self.model_name = model_name
        self.version = version
        self.path = path
        self.state = START
        self.error = None
        self.fingerprint = snapshot(path)
        self.attempts = 0  # failed load attempts so far
        self.retry_at = None  # monotonic time of the next attempt while a retry is pending
        self.signatures = {}
        self.signature_def_map = None
        self.functions = {}
        self.runners = {}  # engine's cache: signature key -> numpy-in/numpy-out callable
        self.loaded = None
        self.window_cost = None  # a WindowCost when its signatures read long texts in windows
        self._cond = threading.Condition(threading.Lock())
        self._refs = 0
        self._closed = False

    def __repr__(self):
        return f"ServableVersion({self.model_name!r}, {self.version}, {self.state})"

    def try_acquire(self) -> bool:
        """Take a reference unless unloading has begun (then the caller re-resolves)."""
        with self._cond:
            if self._closed:
                return False
            self._refs += 1
            return True

    def release(self) -> None:
        """Drop a reference taken by `try_acquire` / `ModelRegistry.acquire`."""
        with self._cond:
            self._refs -= 1
            if self._refs == 0 and self._closed:
                self._cond.notify_all()

    @property
    def in_flight(self) -> int:
        return self._refs

    def close_and_wait(self, timeout_s: float | None = None) -> bool:
        """Refuse new references, wait until in-flight requests finish. True when idle."""
        with self._cond:
            self._closed = True
            return self._cond.wait_for(lambda: self._refs == 0, timeout_s)

    def drop(self) -> None:
        """Release the loaded model (TF frees its resources once unreferenced)."""
        self.functions = {}
        self.runners = {}
        self.loaded = None
