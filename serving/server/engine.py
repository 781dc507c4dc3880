"""The embedded model server's core: TF Serving's Predict / Classify / Regress semantics on numpy arrays.

`InferenceEngine` loads SavedModel versions in this process (`ModelRegistry`: version
policies, labels, load retries, hot swap without failed requests), checks each request
against its signature (`validate_inputs`), merges concurrent requests into batches
(`BatchScheduler`, TF Serving's four batching knobs) and runs them. It speaks arrays only:
the gRPC adapter (`grpc_service`, TensorProto codec `tensor_proto`) and the REST adapter
(`rest_service`, JSON codec `json_codec`) translate their wire formats around it.

Every request holds its model version through `servable()`, a context manager that takes
one reference for the whole request (so a hot swap can never decode with one version and
run another) and counts the request as in flight, which is what `stop()` drains.

Behaviour follows tensorflow_model_server, with one deliberate extension: Classify/Regress
without a signature_name use "serving_default" when it is a classify (regress) signature,
else the first signature (by name) with that method: TF Serving would fail, and a BERT
export's serving_default is a predict signature.

Example:
    >>> import numpy as np
    >>> engine = InferenceEngine([ModelSource("bert", "/models/bert")],       # doctest: +SKIP
    ...                          batching=BatchingOptions(max_batch_size=32))
    >>> engine.start()                                                        # doctest: +SKIP
    >>> version, signature, outputs = engine.predict_arrays(                  # doctest: +SKIP
    ...     "bert", inputs={"text": np.array([b"a fine film"], dtype=object)})
    >>> outputs["label"]                                                      # doctest: +SKIP
    array([b'positive'], dtype=object)
    >>> engine.stop()                                                         # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Mapping, Sequence

import numpy as np

from serving.server.batching import CLIENT_ALIVE, BatchingOptions, BatchScheduler
from serving.server.errors import ServingError, TaskSizeError, from_tf_error, name_list
from serving.server.model_config import ModelSource, read_models_config
from serving.server.model_registry import LoadRetryOptions, ModelRegistry, ServableVersion
from serving.server.request_validation import Limits, check_window_count, validate_inputs
from serving.server.signatures import CLASSIFY_METHOD, REGRESS_METHOD

__all__ = ["InferenceEngine", "ModelSource", "BatchingOptions", "Limits", "LoadRetryOptions", "ServingError"]

log = logging.getLogger(__name__)

DEFAULT_SIGNATURE = "serving_default"

# A long-text request runs in parts of at most this many windows (fewer under batching: a
# batch's max_batch_size). One part of 256 windows of 128 is the graph's own chunk
# (`serving.signatures.module.MODEL_CALL_TOKENS`), about a second of a MiniLM-sized model on two
# cores: what a cancelled request, a short request behind it, or a drain waits at most.
CHUNK_WINDOWS = 256


def _client_alive(alive) -> bool:
    try:
        return bool(alive())
    except Exception:  # noqa: BLE001 - a front end's check must never fail the request
        return True


class InferenceEngine:
    """Serve the models of `models` (see module docstring).

    Args:
        models: `ModelSource`s (name, base_path, version policy, labels).
        batching: Server-side batching parameters; None runs each request on its own.
        limits: Per-request size limits.
        poll_interval_s: Seconds between file-system polls for new/removed versions
            (<= 0: load once at start()).
        load_retries: How often and how far apart failed loads are retried (TF Serving's
            --max_num_load_retries / --load_retry_interval_micros).
        allow_version_labels_for_unavailable_models: Accept version labels that point at a
            version not AVAILABLE once `start()` has loaded the models (TF Serving's flag of the
            same name, default False: `start()` refuses such a label with FAILED_PRECONDITION).
    """

    def __init__(
        self,
        models: Sequence[ModelSource],
        *,
        batching: BatchingOptions | None = None,
        limits: Limits = Limits(),
        poll_interval_s: float = 1.0,
        load_retries: LoadRetryOptions = LoadRetryOptions(),
        allow_version_labels_for_unavailable_models: bool = False,
    ):
        if not models:
            raise ValueError("InferenceEngine needs at least one ModelSource")
        from serving.server.warmup import replay_warmup

        self.models = list(models)
        self.batching = batching
        self.limits = limits
        self.allow_version_labels_for_unavailable_models = allow_version_labels_for_unavailable_models
        self._registry = ModelRegistry(
            self.models,
            warmup=lambda servable: replay_warmup(self, servable),
            poll_interval_s=poll_interval_s,
            load_retries=load_retries,
        )
        self._scheduler = None
        self._cond = threading.Condition(threading.Lock())
        self._in_flight = 0
        self._started = False
        self._stopping = False
        self._cancel_running = threading.Event()  # set when the drain's time is up

    @classmethod
    def from_config_file(cls, path, **kwargs) -> "InferenceEngine":
        """An engine for the models of a TF Serving models.config file (kwargs: see the class)."""
        return cls(read_models_config(path), **kwargs)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Load every model's versions (with warmup), then start polling and batching threads.

        Versions that fail to load are reported by `model_status`, not raised; check `is_ready()`.

        Raises:
            ServingError: FAILED_PRECONDITION for a version label pointing at a version that is
                not AVAILABLE (see `allow_version_labels_for_unavailable_models`); the engine is
                stopped again.
        """
        if self._started:
            return
        if self.batching is not None:
            self._scheduler = BatchScheduler(self.batching, name="batch")
        self._registry.start()
        self._started = True
        if not self.allow_version_labels_for_unavailable_models:
            try:
                self._check_labels()
            except ServingError:
                self.stop(drain_timeout_s=0)
                raise

    def _check_labels(self):
        """TF Serving assigns a label only to an AVAILABLE version: a label to any other is refused."""
        for source in self.models:
            if not source.labels:
                continue
            available = sorted(s["version"] for s in self._safe_status(source.name) if s["state"] == "AVAILABLE")
            for label, version in sorted(source.labels.items()):
                if version not in available:
                    raise ServingError(
                        "FAILED_PRECONDITION",
                        f"model '{source.name}': version label '{label}' points to version {version}, which is not "
                        f"available (available versions: {available}; base_path {source.base_path}). Fix the label "
                        "in models.config, or add the version first"
                        + (" (a version_labels entry without value: reads as version 0)" if version == 0 else ""),
                    )

    def _safe_status(self, name):
        try:
            return self.model_status(name)
        except ServingError:  # no version at all
            return []

    def stop(self, drain_timeout_s: float = 30.0) -> bool:
        """Refuse new requests (UNAVAILABLE), finish in-flight and queued ones, stop threads, unload.

        Args:
            drain_timeout_s: Longest wait for in-flight requests.

        Returns:
            True when every in-flight request finished in time.
        """
        deadline = time.monotonic() + drain_timeout_s
        with self._cond:
            self._stopping = True
        self.begin_drain()
        with self._cond:
            drained = self._cond.wait_for(lambda: self._in_flight == 0, max(0.0, deadline - time.monotonic()))
        if not drained:
            # The drain's time is up: long requests stop at their next part (`_run_in_parts`).
            self._cancel_running.set()
        if self._scheduler is not None:
            drained = self._scheduler.stop(max(0.0, deadline - time.monotonic())) and drained
        self._registry.stop(max(0.0, deadline - time.monotonic()))
        self._registry.unload_all(timeout_s=max(0.0, deadline - time.monotonic()))
        if not drained:
            log.warning("stop(): requests still in flight after %.1f s", drain_timeout_s)
        return drained

    def begin_drain(self) -> None:
        """Run queued batches now and close every later batch at once (no batch timeout): called
        when a drain begins, before the front ends stop taking requests, so that queued work does
        not wait out its batch timeout inside the grace period."""
        if self._scheduler is not None:
            self._scheduler.flush(keep_flushing=True)

    def is_ready(self) -> bool:
        """True when started, not stopping, and every model has an AVAILABLE version."""
        return self._started and not self._stopping and self._registry.is_ready()

    def poll_now(self, model_name: str | None = None) -> None:
        """Poll the file system now (one model or all) instead of waiting for the interval."""
        for name in [model_name] if model_name else self._registry.model_names():
            self._registry.poll(name)

    def batching_stats(self) -> dict:
        """Counters of the batch scheduler (batches, tasks, rows, merged_batches, ...); {} without batching."""
        return self._scheduler.stats() if self._scheduler is not None else {}

    def batching_queued(self) -> int:
        """Requests waiting in the batch queue now (not those being run); 0 without batching."""
        return self._scheduler.pending() if self._scheduler is not None else 0

    @property
    def in_flight(self) -> int:
        """Requests inside `servable()` right now."""
        return self._in_flight

    @contextlib.contextmanager
    def servable(self, model_name: str, version: int | None = None, version_label: str | None = None):
        """The one way a request reaches a model: `with engine.servable(name) as servable: ...`.

        Counts the request as in flight (what `stop()` waits for) and holds one reference to
        the resolved version until the block ends, so a version that is being swapped out
        stays loaded for the whole request.

        Raises:
            ServingError: UNAVAILABLE while stopping or before start; NOT_FOUND / UNAVAILABLE
                from the registry for unknown or loading versions.
        """
        with self._cond:
            if self._stopping:
                raise ServingError("UNAVAILABLE", "server is shutting down")
            if not self._started:
                raise ServingError("UNAVAILABLE", "server is not started")
            self._in_flight += 1
        try:
            servable = self._registry.acquire(model_name, version, version_label)
            try:
                yield servable
            finally:
                servable.release()
        finally:
            with self._cond:
                self._in_flight -= 1
                if self._in_flight == 0 and self._stopping:
                    self._cond.notify_all()

    # ------------------------------------------------------------------ running signatures

    def _runner(self, servable: ServableVersion, signature_name: str):
        """A cached function {name: ndarray} -> {name: ndarray} calling one signature."""
        runners = servable.runners
        runner = runners.get(signature_name)
        if runner is not None:
            return runner
        import tensorflow as tf

        fn = servable.functions[signature_name]
        context = f"model '{servable.model_name}' version {servable.version} signature '{signature_name}'"
        constant = tf.constant
        op_error = tf.errors.OpError

        def runner(arrays):
            try:
                outputs = fn(**{name: constant(array) for name, array in arrays.items()})
            except op_error as exc:
                raise from_tf_error(exc, context) from None
            except (TypeError, ValueError) as exc:
                raise ServingError("INVALID_ARGUMENT", f"{context}: {exc}") from None
            return {name: tensor.numpy() for name, tensor in outputs.items()}

        runners[signature_name] = runner
        return runner

    def signature(self, servable: ServableVersion, signature_name: str):
        """The `SignatureInfo` of `signature_name` ("" = serving_default) in `servable`."""
        signature_name = signature_name or DEFAULT_SIGNATURE
        if signature_name not in servable.functions:
            raise ServingError(
                "FAILED_PRECONDITION",
                f"serving signature key '{signature_name[:200]}' not found in model '{servable.model_name}' "
                f"version {servable.version}; signatures: {sorted(servable.functions)}",
            )
        return servable.signatures[signature_name]

    def run(self, servable, signature_name, inputs, *, output_filter=(), batch=True, limits=None):
        """Validate `inputs` against the signature, (batch,) run; returns {output name: ndarray}.

        `limits`: the request limits to hold `inputs` to (default: the engine's; warmup passes
        `Limits.for_warmup()`). `batch=False` runs at once instead of queuing (warmup), still held to
        batching's `max_batch_size` as TF Serving holds it (`TaskSizeError`)."""
        signature_name = signature_name or DEFAULT_SIGNATURE
        limits = self.limits if limits is None else limits
        signature = self.signature(servable, signature_name)
        if output_filter:
            seen = set()
            for name in output_filter:  # as TF Serving's PreProcessPrediction
                if name in seen:
                    raise ServingError("INVALID_ARGUMENT", f"duplicate output tensor alias: {name[:200]}")
                seen.add(name)
            unknown = set(output_filter) - set(signature.outputs)
            if unknown:
                raise ServingError(
                    "INVALID_ARGUMENT",
                    f"output_filter names unknown output(s) {name_list(unknown)}; signature '{signature_name}' "
                    f"outputs: {name_list(signature.outputs, limit=20)}",
                )
        where = f"model '{servable.model_name}' version {servable.version} signature '{signature_name}': "
        arrays, rows = validate_inputs(signature, inputs, limits, where=where)
        # A long-text signature's real batch is its windows: they are limited, and they count
        # in a merged batch, not the rows.
        window_cost = servable.window_cost
        cost = window_cost.cost(arrays) if window_cost is not None else None
        if cost is not None:
            check_window_count(window_cost.cost(arrays, bound=True), rows or 0, limits, where)
        runner = self._runner(servable, signature_name)
        limited = self._scheduler is not None and rows is not None and signature.batchable
        if limited and rows > self._scheduler.options.max_batch_size:
            # TF Serving's batching refuses a request (a "task") of more rows than max_batch_size
            # (its BatchScheduler's input_batch_size_limit), in these words: a client tested here
            # meets the same answer there. A warmup record (batch=False: run at once, not queued)
            # too: TF Serving replays warmup through the batching session, and fails the load.
            limit = self._scheduler.options.max_batch_size
            raise TaskSizeError(rows, limit, f"{where}send at most {limit} rows a request, or serve with a "
                                             "larger --max-batch-size")
        batched = batch and limited
        if batched:
            key = (servable, signature_name, tuple(a.shape[1:] for a in arrays.values()))

            def run_part(part, part_rows, part_cost):
                return self._scheduler.submit(key, runner, part, part_rows, cost=part_cost)
        elif limited:  # warmup: at once, padded to allowed_batch_sizes as TF Serving's batching session pads it
            def run_part(part, part_rows, part_cost):
                return self._scheduler.run_now(runner, part, part_rows, cost=part_cost)
        else:
            def run_part(part, part_rows, part_cost):
                return runner(part)
        if cost is not None and rows and signature.batchable and cost > self._chunk_windows():
            outputs = self._run_in_parts(run_part, arrays, window_cost, where)
        else:
            outputs = run_part(arrays, rows, cost)
        if output_filter:
            outputs = {name: outputs[name] for name in output_filter}
        return outputs

    def _chunk_windows(self) -> int:
        """Most windows one part of a long request runs at once (`_run_in_parts`)."""
        if self._scheduler is not None:
            return min(CHUNK_WINDOWS, self._scheduler.options.max_batch_size)
        return CHUNK_WINDOWS

    def _run_in_parts(self, run_part, arrays, window_cost, where):
        """A long-text request run as parts of whole texts of at most `_chunk_windows()` windows.

        Between parts the request stops when its client has gone (a gRPC call cancelled or past
        its deadline, a REST connection closed: CANCELLED) or when the drain's time is up
        (UNAVAILABLE). Under batching each part is queued after the requests that arrived while
        the previous part ran, so a short request waits for one part, not for the whole long
        request. Rows are independent: the outputs are those of one call.
        """
        windows = window_cost.row_windows(arrays)
        bounds, start, budget = [], 0, self._chunk_windows()
        while start < len(windows):
            stop, total = start + 1, int(windows[start])
            while stop < len(windows) and total + windows[stop] <= budget:
                total += int(windows[stop])
                stop += 1
            bounds.append((start, stop, total))
            start = stop
        alive = CLIENT_ALIVE.get()
        parts = []
        for index, (start, stop, total) in enumerate(bounds):
            if index:
                if self._cancel_running.is_set():
                    raise ServingError("UNAVAILABLE", f"{where}the server is shutting down: the request was "
                                                      f"stopped after {index} of {len(bounds)} parts; retry")
                if alive is not None and not _client_alive(alive):
                    raise ServingError("CANCELLED", f"{where}the client went away (cancelled, or past its "
                                                    f"deadline) after {index} of {len(bounds)} parts ran")
            parts.append(run_part({name: array[start:stop] for name, array in arrays.items()}, stop - start, total))
        return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}

    # ------------------------------------------------------------------ predict

    def predict_arrays(
        self,
        model_name: str,
        *,
        version: int | None = None,
        version_label: str | None = None,
        signature_name: str = DEFAULT_SIGNATURE,
        inputs: Mapping[str, np.ndarray],
        output_filter: Sequence[str] = (),
    ):
        """Run a signature on numpy inputs.

        Args:
            model_name: A served model.
            version: A version number (default: the highest AVAILABLE one).
            version_label: A version label instead of `version`.
            signature_name: Signature key ("" means "serving_default").
            inputs: {input name: array}; strings as object arrays of bytes (or str).
            output_filter: Output names to return (default: all).

        Returns:
            (resolved version, signature name, {output name: ndarray}).
        """
        signature_name = signature_name or DEFAULT_SIGNATURE
        with self.servable(model_name, version, version_label) as servable:
            outputs = self.run(servable, signature_name, inputs, output_filter=output_filter)
            return servable.version, signature_name, outputs

    # ------------------------------------------------------------------ classify / regress

    def pick_signature(self, servable, signature_name, method) -> str:
        """The classify (regress) signature a request names ("" = serving_default), checked as TF Serving's
        GetClassificationSignatureDef / GetRegressionSignatureDef (servables/tensorflow/classifier.cc,
        regressor.cc) check it: INVALID_ARGUMENT "No signature was found with the name: ..." for a missing
        one, "Expected classification signature method_name to be ..." for one of another method (a
        predict serving_default included: TF Serving never picks another signature by itself)."""
        kind = "classification" if method == CLASSIFY_METHOD else "regression"
        where = f"model '{servable.model_name}' version {servable.version}"
        name = signature_name or DEFAULT_SIGNATURE
        if name not in servable.functions:
            raise ServingError("INVALID_ARGUMENT", f"No signature was found with the name: {name[:200]} ({where}; "
                                                   f"signatures: {sorted(servable.functions)})")
        signature = servable.signatures[name]
        if signature.method_name != method:
            named = sorted(n for n, sig in servable.signatures.items()
                           if sig.method_name == method and n in servable.functions)
            hint = f"; name its {kind} signature in signature_name: {named}" if named else ""
            raise ServingError("INVALID_ARGUMENT",
                               f"Expected {kind} signature method_name to be {method}. Was: {signature.method_name} "
                               f"({where}, signature '{name}'{hint})")
        return name

    def run_examples(self, servable, method, signature_name, serialized, *, batch=True, limits=None):
        """Run a classify/regress signature of `servable` on serialized tf.Examples: (name, outputs);
        `limits` as in `run`."""
        if not serialized:
            raise ServingError("INVALID_ARGUMENT", "input is empty: the request has no examples")
        name = self.pick_signature(servable, signature_name, method)
        signature = servable.signatures[name]
        if list(signature.inputs) != ["inputs"]:
            raise ServingError(
                "FAILED_PRECONDITION",
                f"signature '{name}' must have exactly one input named 'inputs' (serialized tf.Example), "
                f"has {sorted(signature.inputs)}",
            )
        array = np.empty(len(serialized), dtype=object)
        array[:] = serialized
        return name, self.run(servable, name, {"inputs": array}, batch=batch, limits=limits)

    def _examples(self, method, model_name, version, version_label, signature_name, serialized):
        with self.servable(model_name, version, version_label) as servable:
            name, outputs = self.run_examples(servable, method, signature_name, serialized)
            return servable.version, name, outputs

    def classify_examples(self, model_name: str, *, version=None, version_label=None, signature_name=None,
                          serialized: Sequence[bytes]):
        """Classify serialized tf.Examples.

        Returns:
            (resolved version, signature name, [[(label, score), ...] per example]).
        """
        resolved, name, outputs = self._examples(CLASSIFY_METHOD, model_name, version, version_label,
                                                 signature_name, serialized)
        return resolved, name, classification_rows(outputs, len(serialized), name)

    def regress_examples(self, model_name: str, *, version=None, version_label=None, signature_name=None,
                         serialized: Sequence[bytes]):
        """Regress serialized tf.Examples; returns (resolved version, signature name, [value per example])."""
        resolved, name, outputs = self._examples(REGRESS_METHOD, model_name, version, version_label,
                                                 signature_name, serialized)
        return resolved, name, regression_values(outputs, len(serialized), name)

    def multi_inference_examples(self, model_name: str, *, version=None, version_label=None, tasks,
                                 serialized: Sequence[bytes]):
        """Several classify / regress signatures of one model version on the same serialized tf.Examples
        (TF Serving's MultiInference: the version is resolved once, for every task).

        Args:
            tasks: `[(signature name, method)]`, method `CLASSIFY_METHOD` or `REGRESS_METHOD`.

        Returns:
            (resolved version, [(signature name, method, rows)]): rows as `classify_examples` /
            `regress_examples` give them.
        """
        with self.servable(model_name, version, version_label) as servable:
            results = []
            for signature_name, method in tasks:
                name, outputs = self.run_examples(servable, method, signature_name, serialized)
                convert = classification_rows if method == CLASSIFY_METHOD else regression_values
                results.append((name, method, convert(outputs, len(serialized), name)))
            return servable.version, results

    # ------------------------------------------------------------------ metadata / status

    def metadata(self, model_name: str, version: int | None = None, version_label: str | None = None):
        """(resolved version, tensorflow.serving.SignatureDefMap) of a model version."""
        with self.servable(model_name, version, version_label) as servable:
            return servable.version, servable.signature_def_map

    def model_status(self, model_name: str, version: int | None = None, version_label: str | None = None) -> list:
        """[{version, state, error_code, error_message}] of a model's tracked versions, newest first.

        state: START | LOADING | AVAILABLE | UNLOADING | END; a failed load is END with its
        error code and message (LOADING with the last error while a retry is pending).
        """
        if version_label is not None:  # "" too: a label no model has (as TF Serving)
            labels = self._registry.source(model_name).labels
            if version_label not in labels:
                raise ServingError("INVALID_ARGUMENT", f"Unrecognized servable version label: {version_label[:200]} "
                                                       f"(model '{model_name}'; labels: {sorted(labels) or 'none'})")
            version = labels[version_label]
        return [
            {
                "version": s.version,
                "state": s.state,
                "error_code": s.error.code if s.error is not None else "OK",
                "error_message": s.error.message if s.error is not None else "",
            }
            for s in self._registry.status(model_name, version)
        ]


def classification_rows(outputs, rows, name):
    """[[(label, score), ...] per row] of a classify signature's `classes` / `scores` outputs."""
    classes, scores = outputs.get("classes"), outputs.get("scores")
    if classes is None and scores is None:
        raise ServingError("FAILED_PRECONDITION",
                           f"classification signature '{name}' has neither a 'classes' nor a 'scores' output")
    for key, array in (("classes", classes), ("scores", scores)):
        if array is not None and (array.ndim != 2 or array.shape[0] != rows):
            raise ServingError("INTERNAL", f"classification signature '{name}': output '{key}' has shape "
                                           f"{list(array.shape)}, expected [{rows}, num_classes]")
    if classes is not None and scores is not None and classes.shape != scores.shape:
        raise ServingError("INTERNAL", f"classification signature '{name}': 'classes' {list(classes.shape)} and "
                                       f"'scores' {list(scores.shape)} differ in shape")
    k = (classes if classes is not None else scores).shape[1]
    labels = (
        [[v.decode("utf-8", "replace") for v in row] for row in classes.tolist()]
        if classes is not None
        else [[""] * k for _ in range(rows)]
    )
    values = scores.astype(np.float32).tolist() if scores is not None else [[0.0] * k for _ in range(rows)]
    return [list(zip(lab, val)) for lab, val in zip(labels, values)]


def regression_values(outputs, rows, name):
    """[value per row] of a regress signature's `outputs` ([rows] or [rows, 1])."""
    values = outputs.get("outputs")
    if values is None:
        raise ServingError("FAILED_PRECONDITION", f"regression signature '{name}' has no 'outputs' output")
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.ndim != 1 or values.shape[0] != rows:
        raise ServingError("INTERNAL", f"regression signature '{name}': output 'outputs' has shape "
                                       f"{list(values.shape)}, expected [{rows}] or [{rows}, 1]")
    return values.astype(np.float32).tolist()
